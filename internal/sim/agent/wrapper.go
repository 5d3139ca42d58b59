package agent

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// This file plays Gantry's wrapper of the hook (config/container-hooks/hook.js, which a
// runner pod of a Kubernetes-mode pool runs as ACTIONS_RUNNER_CONTAINER_HOOKS): the
// changes its header's table says it makes, as it makes them. TestWrapperPlaysHookJS
// runs hook.js with node on the same inputs and compares.

// loopback is where a service is reached in the workflow pod: every container shares the
// pod's network.
const loopback = "127.0.0.1"

// dnsName is a DNS-1123 subdomain, what a hostAliases hostname must be.
var dnsName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)

// withoutHostPort is a port mapping without its host port: "5432:5432/tcp" → "5432/tcp".
// A mapping with more than one ':' is left for the hook to refuse.
func withoutHostPort(mapping string) string {
	ports, proto, hasProto := strings.Cut(mapping, "/")
	parts := strings.Split(ports, ":")
	if len(parts) != 2 {
		return mapping
	}
	if !hasProto {
		return parts[1]
	}
	return parts[1] + "/" + proto
}

// serviceHostnames are the names the wrapper aliases to the loopback address: each
// service's key (when the input has it) and its container's name, lower-cased, valid
// DNS names only, once each.
func serviceHostnames(services []hookContainer) []string {
	var names []string
	for _, s := range services {
		for _, n := range []string{s.ContextName, serviceContainerName(s.Image)} {
			n = strings.ToLower(n)
			if n == "" || len(n) > 253 || !dnsName.MatchString(n) || slices.Contains(names, n) {
				continue
			}
			names = append(names, n)
		}
	}
	return names
}

// wrapPrepareJob is prepare_job's input and template as the wrapper hands them to the
// hook: no host port in any mapping, and the template (JSON; none: {}) with a hostAliases
// entry for the services' names — unchanged if it is not JSON.
func wrapPrepareJob(args prepareJobArgs, template []byte) (prepareJobArgs, []byte, error) {
	out := prepareJobArgs{Services: slices.Clone(args.Services)}
	if args.Container != nil {
		c := *args.Container
		out.Container = &c
	}
	strip := func(c *hookContainer) {
		if c.PortMappings == nil {
			return
		}
		ports := make([]string, len(c.PortMappings))
		for i, m := range c.PortMappings {
			ports[i] = withoutHostPort(m)
		}
		c.PortMappings = ports
	}
	if out.Container != nil {
		strip(out.Container)
	}
	for i := range out.Services {
		strip(&out.Services[i])
	}
	hostnames := serviceHostnames(out.Services)
	if len(hostnames) == 0 {
		return out, template, nil
	}
	if len(template) > 0 && !json.Valid(template) {
		return out, template, nil // services reached at localhost only
	}
	tmpl := map[string]any{}
	if len(template) > 0 {
		if err := json.Unmarshal(template, &tmpl); err != nil {
			return out, nil, fmt.Errorf("reading the hook template: %w", err)
		}
	}
	spec, _ := tmpl["spec"].(map[string]any)
	if spec == nil {
		spec = map[string]any{}
	}
	aliases, _ := spec["hostAliases"].([]any)
	spec["hostAliases"] = append(aliases, map[string]any{"ip": loopback, "hostnames": hostnames})
	tmpl["spec"] = spec
	b, err := json.Marshal(tmpl)
	return out, b, err
}

// refusedStep is the wrapper's refusal of run_container_step's input step, "" when it
// passes it to the hook.
func refusedStep(step hookContainer) string {
	if step.Dockerfile != "" {
		return fmt.Sprintf("The action %s of this step is a Dockerfile action (%s): "+
			"pools in Kubernetes mode cannot build images (GitHub's container hook v0.8.1: Building container actions is not currently supported). "+
			"Use the action's published image (uses: docker://IMAGE), a JavaScript or composite action, "+
			"or a pool without Kubernetes mode that runs Docker (Docker-in-Docker)", actionOf(step.Dockerfile), step.Dockerfile)
	}
	if step.EntryPoint == "" {
		return fmt.Sprintf("The image action %s of this step names no entrypoint: GitHub's container hook v0.8.1 starts the step's pod "+
			"with tail -f /dev/null and runs the entrypoint the step names. Add with: {entrypoint: ..., args: ...} to the step", step.Image)
	}
	return ""
}

// actionPath is a Dockerfile under the runner's _actions directory.
var actionPath = regexp.MustCompile(`/_actions/([^/]+)/([^/]+)/([^/]+)/(?:(.*)/)?[^/]+$`)

// actionOf names the action of a Dockerfile (…/_actions/OWNER/REPO/REF[/PATH]/Dockerfile
// → OWNER/REPO[/PATH]@REF), else the path.
func actionOf(dockerfile string) string {
	m := actionPath.FindStringSubmatch(dockerfile)
	if m == nil {
		return dockerfile
	}
	name := m[1] + "/" + m[2]
	if m[4] != "" {
		name += "/" + m[4]
	}
	return name + "@" + m[3]
}
