package main

import (
	"fmt"
	"strconv"
	"strings"
)

// argMarkers take key=value arguments after their name and a colon; every other marker
// is a bare name or name=value.
var argMarkers = []string{
	"kubebuilder:validation:XValidation",
	"kubebuilder:validation:items:XValidation",
	"kubebuilder:printcolumn",
	"kubebuilder:resource",
}

// ParseMarker parses one marker line, "+name", "+name=value" or "+name:key=value,...".
func ParseMarker(line string) (Marker, error) {
	body := strings.TrimPrefix(strings.TrimSpace(line), "+")
	for _, name := range argMarkers {
		if rest, ok := strings.CutPrefix(body, name+":"); ok {
			args, err := parseArgs(rest)
			if err != nil {
				return Marker{}, fmt.Errorf("marker +%s: %w", name, err)
			}
			return Marker{Name: name, Args: args}, nil
		}
	}
	name, value, ok := strings.Cut(body, "=")
	if !ok {
		return Marker{Name: body}, nil
	}
	if strings.HasPrefix(value, `"`) || strings.HasPrefix(value, "`") {
		v, rest, err := quoted(value)
		if err != nil {
			return Marker{}, fmt.Errorf("marker +%s: %w", name, err)
		}
		if rest != "" {
			return Marker{}, fmt.Errorf("marker +%s: unexpected %q after the quoted value", name, rest)
		}
		value = v
	}
	return Marker{Name: name, Value: value}, nil
}

// parseArgs reads key=value,key=value where a value is a Go double-quoted string, a
// back-quoted string or a bare word up to the next comma.
func parseArgs(s string) ([]Arg, error) {
	var args []Arg
	for s != "" {
		key, rest, ok := strings.Cut(s, "=")
		if !ok || key == "" || strings.ContainsAny(key, ",\"` ") {
			return nil, fmt.Errorf("want key=value in %q", s)
		}
		var value string
		if strings.HasPrefix(rest, `"`) || strings.HasPrefix(rest, "`") {
			v, after, err := quoted(rest)
			if err != nil {
				return nil, fmt.Errorf("argument %s: %w", key, err)
			}
			value, rest = v, after
		} else {
			i := strings.IndexByte(rest, ',')
			if i < 0 {
				i = len(rest)
			}
			value, rest = rest[:i], rest[i:]
		}
		args = append(args, Arg{Key: key, Value: value})
		switch {
		case rest == "":
			s = ""
		case strings.HasPrefix(rest, ","):
			s = rest[1:]
			if s == "" {
				return nil, fmt.Errorf("trailing comma after %s", key)
			}
		default:
			return nil, fmt.Errorf("want a comma after argument %s, got %q", key, rest)
		}
	}
	return args, nil
}

// quoted reads a Go string literal at the start of s and returns its value and the rest.
func quoted(s string) (string, string, error) {
	if strings.HasPrefix(s, "`") {
		end := strings.IndexByte(s[1:], '`')
		if end < 0 {
			return "", "", fmt.Errorf("unterminated back-quoted string %q", s)
		}
		return s[1 : end+1], s[end+2:], nil
	}
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			v, err := strconv.Unquote(s[:i+1])
			if err != nil {
				return "", "", fmt.Errorf("bad quoted string %s: %w", s[:i+1], err)
			}
			return v, s[i+1:], nil
		}
	}
	return "", "", fmt.Errorf("unterminated quoted string %q", s)
}
