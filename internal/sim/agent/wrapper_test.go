package agent

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	containerhooks "github.com/gantry-dev/gantry/config/container-hooks"
)

// recorderHook stands for GitHub's hook behind the wrapper: it records each input it gets
// and the template it is given, answers prepare_job with a response of as many services
// as it got, and fails prepare_job when FAIL_PREPARE is set.
const recorderHook = `
const fs = require('fs')
const lines = fs.readFileSync(0, 'utf8').split('\n').filter(l => l.trim() !== '')
const input = JSON.parse(lines[lines.length - 1])
const file = process.env.ACTIONS_RUNNER_CONTAINER_HOOK_TEMPLATE
const template = file ? fs.readFileSync(file, 'utf8') : ''
fs.appendFileSync(process.env.RECORD, JSON.stringify({ input, template }) + '\n')
if (input.command === 'prepare_job') {
  if (process.env.FAIL_PREPARE) {
    process.exit(3)
  }
  const services = (input.args.services || []).map(s => ({ image: s.image, ports: {} }))
  fs.writeFileSync(input.responseFile, JSON.stringify({ state: { jobPod: 'r1-workflow' }, context: { services }, isAlpine: false }) + '\n')
}
`

// wrapperRun is one run of hook.js: its exit code and output, the inputs the hook got
// and the template it was given with each, and the response file after it.
type wrapperRun struct {
	code      int
	stdout    string
	calls     []json.RawMessage
	templates []string
	response  string
}

// runWrapper runs config/container-hooks/hook.js with node, as the runner runs it, in
// front of recorderHook, with input on its stdin and the template file holding template
// ("" none).
func runWrapper(t *testing.T, input any, template string, failPrepare bool) wrapperRun {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is needed to run the container hook wrapper (Debian: apt-get install nodejs): ", err)
	}
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	wrapper, hook := write("wrapper.js", containerhooks.Wrapper), write("hook.js", recorderHook)
	record, response := filepath.Join(dir, "record.jsonl"), write("response.json", "")
	in, err := json.Marshal(input)
	if err != nil {
		t.Fatal(err)
	}
	in = bytes.ReplaceAll(in, []byte("RESPONSE_FILE"), []byte(response))
	cmd := exec.CommandContext(t.Context(), node, wrapper)
	cmd.Env = []string{"GANTRY_CONTAINER_HOOK=" + hook, "RECORD=" + record, "RUNNER_TEMP=" + dir}
	if template != "" {
		cmd.Env = append(cmd.Env, EnvHookTemplate+"="+write("workflow-pod.json", template))
	}
	if failPrepare {
		cmd.Env = append(cmd.Env, "FAIL_PREPARE=1")
	}
	cmd.Stdin = bytes.NewReader(append(in, '\n'))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	run := wrapperRun{}
	var exitErr *exec.ExitError
	if err := cmd.Run(); errors.As(err, &exitErr) {
		run.code = exitErr.ExitCode()
	} else if err != nil {
		t.Fatalf("running hook.js: %v (%s)", err, stderr.String())
	}
	run.stdout = stdout.String()
	if f, err := os.Open(record); err == nil {
		defer f.Close()
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
		for sc.Scan() {
			var rec struct {
				Input    json.RawMessage `json:"input"`
				Template string          `json:"template"`
			}
			if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
				t.Fatal(err)
			}
			run.calls, run.templates = append(run.calls, rec.Input), append(run.templates, rec.Template)
		}
	}
	b, _ := os.ReadFile(response)
	run.response = strings.TrimSpace(string(b))
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "gantry-hook-") {
			t.Errorf("hook.js left %s behind in RUNNER_TEMP", e.Name())
		}
	}
	return run
}

// hookCall is a hook input as recorded.
type hookCall struct {
	Command string          `json:"command"`
	Args    json.RawMessage `json:"args"`
}

func decode[T any](t *testing.T, raw json.RawMessage) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	return v
}

// jsonValue is raw JSON as plain values, to compare documents whatever their key order.
func jsonValue(t *testing.T, raw string) any {
	t.Helper()
	if raw == "" {
		return nil
	}
	var v any
	if err := json.Unmarshal([]byte(raw), &v); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	return v
}

// The simulated runner plays Gantry's wrapper (wrapper.go) as hook.js does it: run by
// node on the same prepare_job inputs, hook.js hands GitHub's hook the same arguments
// (no host port) and template (the services' names aliased to the loopback address) as
// wrapPrepareJob, maps each service's declared ports to themselves in the response, and
// runs cleanup_job at once after a failed prepare_job.
func TestWrapperPlaysHookJS(t *testing.T) {
	const template = `{"metadata":{"labels":{"gantry.dev/pool":"linux"}},"spec":{"automountServiceAccountToken":false,"hostAliases":[{"ip":"10.0.0.1","hostnames":["mirror"]}]}}`
	tests := []struct {
		name     string
		args     prepareJobArgs
		template string
	}{
		{"ports and services", prepareJobArgs{
			Container: &hookContainer{Image: "node:22", PortMappings: []string{"8080:80", "9000"}, Registry: &hookRegistry{Username: "u", Password: "p", ServerURL: "ghcr.io"}},
			Services: []hookContainer{
				{Image: "postgres:17", PortMappings: []string{"5432:5432", "5433:5433/udp"}},
				{Image: "ghcr.io/acme/Redis:7"},
				{Image: "docker.io/library/my_db:1", PortMappings: []string{"1:2:3"}},
				{Image: "mysql:8", ContextName: "db"},
			},
		}, template},
		{"no template file", prepareJobArgs{Container: &hookContainer{Image: "node:22"}, Services: []hookContainer{{Image: "postgres:17"}}}, ""},
		{"no services", prepareJobArgs{Container: &hookContainer{Image: "node:22", PortMappings: []string{"80:80"}}}, template},
		{"a template that is not JSON", prepareJobArgs{Container: &hookContainer{Image: "node:22"}, Services: []hookContainer{{Image: "postgres:17"}}},
			"spec:\n  automountServiceAccountToken: false\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			run := runWrapper(t, map[string]any{"command": "prepare_job", "responseFile": "RESPONSE_FILE", "args": tc.args, "state": map[string]any{}}, tc.template, false)
			if run.code != 0 || len(run.calls) != 1 {
				t.Fatalf("exit %d, %d hook calls (%s): want 0, 1", run.code, len(run.calls), run.stdout)
			}
			wantArgs, wantTemplate, err := wrapPrepareJob(tc.args, []byte(tc.template))
			if err != nil {
				t.Fatal(err)
			}
			call := decode[hookCall](t, run.calls[0])
			if diff := cmp.Diff(wantArgs, decode[prepareJobArgs](t, call.Args)); diff != "" || call.Command != "prepare_job" {
				t.Errorf("%s: the hook's arguments (-wrapPrepareJob +hook.js):\n%s", call.Command, diff)
			}
			if !json.Valid(wantTemplate) && len(wantTemplate) > 0 {
				if string(wantTemplate) != tc.template || run.templates[0] != tc.template {
					t.Errorf("a template that is not JSON: wrapPrepareJob gives %q, hook.js %q; want it unchanged", wantTemplate, run.templates[0])
				}
			} else if diff := cmp.Diff(jsonValue(t, string(wantTemplate)), jsonValue(t, run.templates[0])); diff != "" {
				t.Errorf("the hook's template (-wrapPrepareJob +hook.js):\n%s", diff)
			}
			var ports []map[string]string
			for _, s := range decode[struct {
				Context struct {
					Services []struct {
						Ports map[string]string `json:"ports"`
					} `json:"services"`
				} `json:"context"`
			}](t, json.RawMessage(run.response)).Context.Services {
				ports = append(ports, s.Ports)
			}
			var want []map[string]string
			for _, s := range tc.args.Services {
				m := map[string]string{}
				for _, p := range s.PortMappings {
					c := strings.Split(strings.Split(p, "/")[0], ":")
					m[c[len(c)-1]] = c[len(c)-1]
				}
				want = append(want, m)
			}
			if diff := cmp.Diff(want, ports); diff != "" {
				t.Errorf("the response's service ports (-want +got):\n%s", diff)
			}
		})
	}
	// The hostnames of the first case, as both name them.
	_, tmpl, _ := wrapPrepareJob(tests[0].args, []byte(template))
	if !strings.Contains(string(tmpl), `"hostnames":["postgres","redis","db","mysql"]`) {
		t.Errorf("the aliased names: %s; want postgres, redis (lower-cased), db (the input's key), mysql, and not my_db", tmpl)
	}

	t.Run("a failed prepare_job is cleaned up at once", func(t *testing.T) {
		run := runWrapper(t, map[string]any{"command": "prepare_job", "responseFile": "RESPONSE_FILE", "args": tests[0].args}, template, true)
		var commands []string
		for _, c := range run.calls {
			commands = append(commands, decode[hookCall](t, c).Command)
		}
		if diff := cmp.Diff([]string{"prepare_job", "cleanup_job"}, commands); diff != "" || run.code != 3 {
			t.Errorf("exit %d (want the hook's 3), hook commands (-want +got):\n%s", run.code, diff)
		}
	})
}

// The wrapper refuses what GitHub's hook would refuse unclearly, with refusedStep's
// message and without running the hook, and passes any other command on unchanged.
func TestWrapperStepsAsHookJS(t *testing.T) {
	tests := []struct {
		name    string
		command string
		args    any
		refused string
	}{
		{"a Dockerfile action", "run_container_step", hookContainer{Dockerfile: "/home/runner/_work/_actions/acme/build-image/v1/Dockerfile"},
			refusedStep(hookContainer{Dockerfile: "/home/runner/_work/_actions/acme/build-image/v1/Dockerfile"})},
		{"a Dockerfile action in a subdirectory", "run_container_step", hookContainer{Dockerfile: "/home/runner/_work/_actions/acme/tools/v2/lint/Dockerfile"},
			refusedStep(hookContainer{Dockerfile: "/home/runner/_work/_actions/acme/tools/v2/lint/Dockerfile"})},
		{"an image action without an entrypoint", "run_container_step", hookContainer{Image: "alpine:3.20"}, refusedStep(hookContainer{Image: "alpine:3.20"})},
		{"an image action", "run_container_step", hookContainer{Image: "alpine:3.20", EntryPoint: "sh", EntryPointArgs: []string{"-c", "true"}}, ""},
		{"a script step", "run_script_step", map[string]any{"entryPoint": "bash", "entryPointArgs": []string{"-e", "x.sh"}, "workingDirectory": "/__w/app/app"}, ""},
		{"cleanup_job", "cleanup_job", map[string]any{}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			input := map[string]any{"command": tc.command, "responseFile": "RESPONSE_FILE", "args": tc.args, "state": map[string]any{"jobPod": "r1-workflow"}}
			run := runWrapper(t, input, "", false)
			if tc.refused != "" {
				if run.code != 1 || len(run.calls) != 0 || strings.TrimSpace(run.stdout) != "::error::"+tc.refused {
					t.Errorf("exit %d, %d hook calls, output %q: want 1, none, ::error::%s", run.code, len(run.calls), run.stdout, tc.refused)
				}
				if !strings.Contains(tc.refused, "acme/") && tc.command == "run_container_step" && strings.Contains(tc.name, "Dockerfile") {
					t.Errorf("the refusal does not name the action: %s", tc.refused)
				}
				return
			}
			if run.code != 0 || len(run.calls) != 1 {
				t.Fatalf("exit %d, %d hook calls: want 0, 1 (%s)", run.code, len(run.calls), run.stdout)
			}
			want, _ := json.Marshal(input)
			want = bytes.ReplaceAll(want, []byte("RESPONSE_FILE"), []byte(decode[struct {
				ResponseFile string `json:"responseFile"`
			}](t, run.calls[0]).ResponseFile))
			if diff := cmp.Diff(jsonValue(t, string(want)), jsonValue(t, string(run.calls[0]))); diff != "" {
				t.Errorf("the hook's input (-runner's +hook.js):\n%s", diff)
			}
		})
	}
	if got := actionOf("/home/runner/_work/_actions/acme/tools/v2/lint/Dockerfile"); got != "acme/tools/lint@v2" {
		t.Errorf("actionOf = %q, want acme/tools/lint@v2", got)
	}
}
