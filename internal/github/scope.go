package github

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ScopeKind is the level at which runners register: a repository, an organization or an
// enterprise.
type ScopeKind string

const (
	// ScopeRepository registers runners in one repository (https://HOST/OWNER/REPO).
	ScopeRepository ScopeKind = "Repository"
	// ScopeOrganization registers runners in an organization (https://HOST/ORG).
	ScopeOrganization ScopeKind = "Organization"
	// ScopeEnterprise registers runners in an enterprise (https://HOST/enterprises/ENT).
	ScopeEnterprise ScopeKind = "Enterprise"
)

// dotcomHost is the canonical host of github.com; www.github.com is accepted as an alias.
const dotcomHost = "github.com"

// maxURLLength matches the MaxLength of spec.github.url in the RunnerPool CRD.
const maxURLLength = 2048

// validURLHelp ends every ParseURL error so a user knows what to write instead.
const validURLHelp = "github.url must be a repository (https://github.com/OWNER/REPO), " +
	"organization (https://github.com/ORG) or enterprise (https://github.com/enterprises/ENTERPRISE) URL " +
	"on github.com or a GitHub Enterprise Server host (https://HOST/ORG), with no query, fragment or extra path"

// Scope is a parsed RunnerPool github.url: where runners register and which API serves it.
// The zero value is not a valid scope; build one with ParseURL.
type Scope struct {
	// Kind says whether Owner/Repo or Enterprise is set.
	Kind ScopeKind
	// Scheme is "https", or "http" for a GitHub Enterprise Server (or simulator) reached
	// without TLS. github.com is always https.
	Scheme string
	// Host is the lower-cased web host with its port, if any: "github.com",
	// "ghes.example.com", "127.0.0.1:8080".
	Host string
	// Owner is the organization (organization scope) or the repository owner
	// (repository scope).
	Owner string
	// Repo is the repository name (repository scope only).
	Repo string
	// Enterprise is the enterprise slug (enterprise scope only).
	Enterprise string
}

// ParseURL parses a RunnerPool's github.url. It accepts what the CRD's admission rule
// accepts, except what can never work: a port outside 1..65535, an organization named
// "enterprises", a repository named "." or ".." or ending in ".git", and the API host
// api.github.com. A trailing slash is tolerated; queries, fragments, credentials, extra
// or empty path segments are rejected with an error that says what a valid URL looks like.
func ParseURL(raw string) (Scope, error) {
	s, err := parseURL(raw)
	if err != nil {
		return Scope{}, fmt.Errorf("invalid github.url: %w; %s", err, validURLHelp)
	}
	return s, nil
}

func parseURL(raw string) (Scope, error) {
	if raw == "" {
		return Scope{}, errors.New("it is empty")
	}
	if len(raw) > maxURLLength {
		return Scope{}, fmt.Errorf("it is longer than %d characters", maxURLLength)
	}
	var s Scope
	rest, ok := strings.CutPrefix(raw, "https://")
	s.Scheme = "https"
	if !ok {
		rest, ok = strings.CutPrefix(raw, "http://")
		s.Scheme = "http"
	}
	if !ok {
		return Scope{}, errors.New(`it must start with "https://" (or "http://" for a GitHub Enterprise Server without TLS)`)
	}
	if strings.ContainsAny(rest, "?#") {
		return Scope{}, errors.New("it must not have a query (?) or fragment (#)")
	}
	hostport, path, hasPath := strings.Cut(rest, "/")
	if strings.Contains(hostport, "@") {
		// Never echo the host part: it may hold a user name and password or token.
		return Scope{}, errors.New("it must not contain credentials: put them in the credentials Secret")
	}
	host, err := parseHost(hostport)
	if err != nil {
		return Scope{}, err
	}
	s.Host = host
	hostname, _, _ := strings.Cut(host, ":")
	switch hostname {
	case dotcomHost, "www." + dotcomHost:
		if hostname != host {
			return Scope{}, errors.New("github.com takes no port")
		}
		s.Host, s.Scheme = dotcomHost, "https"
	case "api." + dotcomHost:
		return Scope{}, errors.New("use the web URL (https://github.com/...), not the API host api.github.com")
	}

	path = strings.TrimSuffix(path, "/")
	if !hasPath || path == "" {
		return Scope{}, fmt.Errorf("%q names no organization, repository or enterprise", raw)
	}
	segs := strings.Split(path, "/")
	for _, seg := range segs {
		if seg == "" {
			return Scope{}, fmt.Errorf("%q has an empty path segment", raw)
		}
	}
	switch {
	case len(segs) == 1 && segs[0] == "enterprises":
		return Scope{}, fmt.Errorf("%q names no enterprise: use https://HOST/enterprises/ENTERPRISE", raw)
	case len(segs) == 1:
		if !validOwner(segs[0]) {
			return Scope{}, fmt.Errorf("%q: organization %q must start with a letter or digit and contain only letters, digits, '-', '_' and '.'", raw, segs[0])
		}
		s.Kind, s.Owner = ScopeOrganization, segs[0]
	case len(segs) == 2 && segs[0] == "enterprises":
		if !validOwner(segs[1]) {
			return Scope{}, fmt.Errorf("%q: enterprise %q must start with a letter or digit and contain only letters, digits, '-', '_' and '.'", raw, segs[1])
		}
		s.Kind, s.Enterprise = ScopeEnterprise, segs[1]
	case len(segs) == 2:
		if !validOwner(segs[0]) {
			return Scope{}, fmt.Errorf("%q: owner %q must start with a letter or digit and contain only letters, digits, '-', '_' and '.'", raw, segs[0])
		}
		if err := validateRepo(segs[1]); err != nil {
			return Scope{}, fmt.Errorf("%q: %w", raw, err)
		}
		s.Kind, s.Owner, s.Repo = ScopeRepository, segs[0], segs[1]
	default:
		return Scope{}, fmt.Errorf("%q has %d path segments; a scope has one (ORG), two (OWNER/REPO) or enterprises/ENTERPRISE", raw, len(segs))
	}
	return s, nil
}

// parseHost validates host[:port] like the CRD rule
// ([A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?(:[0-9]{1,5})?) and lower-cases it.
func parseHost(hostport string) (string, error) {
	host, port, hasPort := strings.Cut(hostport, ":")
	if host == "" {
		return "", errors.New("it has no host")
	}
	for i := 0; i < len(host); i++ {
		c := host[i]
		inner := c == '.' || c == '-'
		if !isAlnum(c) && (!inner || i == 0 || i == len(host)-1) {
			return "", errors.New("its host must be a DNS name or IPv4 address (letters, digits, '.', '-')")
		}
	}
	if hasPort {
		n, err := strconv.Atoi(port)
		if err != nil || len(port) > 5 || !allDigits(port) || n < 1 || n > 65535 {
			return "", errors.New("its port must be a number from 1 to 65535")
		}
	}
	return strings.ToLower(hostport), nil
}

// validOwner reports whether name is a valid organization, user or enterprise name as
// the CRD accepts it: [A-Za-z0-9][A-Za-z0-9_.-]*.
func validOwner(name string) bool {
	if name == "" || !isAlnum(name[0]) {
		return false
	}
	return validNameChars(name)
}

func validateRepo(name string) error {
	switch {
	case !validNameChars(name):
		return fmt.Errorf("repository %q may contain only letters, digits, '-', '_' and '.'", name)
	case name == "." || name == "..":
		return fmt.Errorf("repository %q is not a repository name", name)
	case strings.HasSuffix(strings.ToLower(name), ".git"):
		return fmt.Errorf("repository %q: drop the .git suffix (use the repository's web URL)", name)
	}
	return nil
}

func validNameChars(name string) bool {
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !isAlnum(c) && c != '_' && c != '.' && c != '-' {
			return false
		}
	}
	return name != ""
}

func isAlnum(c byte) bool {
	return ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || ('0' <= c && c <= '9')
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// IsGHES reports whether the scope is on a GitHub Enterprise Server (any host but
// github.com).
func (s Scope) IsGHES() bool { return s.Host != dotcomHost }

// APIBaseURL is the REST API root, with a trailing slash: https://api.github.com/ on
// github.com, SCHEME://HOST/api/v3/ on GitHub Enterprise Server.
func (s Scope) APIBaseURL() string {
	if !s.IsGHES() {
		return "https://api.github.com/"
	}
	return s.Scheme + "://" + s.Host + "/api/v3/"
}

// Path is the REST path prefix of the scope's runner endpoints, without slashes:
// "repos/OWNER/REPO", "orgs/ORG" or "enterprises/ENTERPRISE".
func (s Scope) Path() string {
	switch s.Kind {
	case ScopeRepository:
		return "repos/" + s.Owner + "/" + s.Repo
	case ScopeOrganization:
		return "orgs/" + s.Owner
	case ScopeEnterprise:
		return "enterprises/" + s.Enterprise
	}
	return ""
}

// String is the canonical web URL of the scope; ParseURL(s.String()) == s.
func (s Scope) String() string {
	switch s.Kind {
	case ScopeRepository:
		return s.Scheme + "://" + s.Host + "/" + s.Owner + "/" + s.Repo
	case ScopeOrganization:
		return s.Scheme + "://" + s.Host + "/" + s.Owner
	case ScopeEnterprise:
		return s.Scheme + "://" + s.Host + "/enterprises/" + s.Enterprise
	}
	return "<invalid scope>"
}

// Repository returns the repository scope REPO in an organization scope, on the same
// host: how callers list queued jobs repository by repository for an organization.
func (s Scope) Repository(repo string) (Scope, error) {
	if s.Kind != ScopeOrganization && s.Kind != ScopeRepository {
		return Scope{}, fmt.Errorf("%s is not an organization or repository scope", s)
	}
	if err := validateRepo(repo); err != nil {
		return Scope{}, err
	}
	r := s
	r.Kind, r.Repo = ScopeRepository, repo
	return r, nil
}
