package github

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
)

// serveAdmin serves the admin API under /_sim/: JSON in, JSON out, each endpoint a
// thin layer over the Go API (docs/simulator.md lists them). It needs no credentials;
// the simulator is meant for loopback.
func (s *Sim) serveAdmin(w http.ResponseWriter, r *http.Request) {
	p := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/_sim"), "/")
	key := r.Method + " " + p
	if strings.HasPrefix(p, "/jobs/") && r.Method == http.MethodGet {
		id, err := strconv.ParseInt(strings.TrimPrefix(p, "/jobs/"), 10, 64)
		if err != nil {
			writeError(w, http.StatusNotFound, msgNotFound)
			return
		}
		j, ok := s.Job(id)
		if !ok {
			writeError(w, http.StatusNotFound, msgNotFound)
			return
		}
		writeJSON(w, http.StatusOK, j)
		return
	}
	switch key {
	case "POST /enterprises":
		adminCreate(w, r, s.CreateEnterprise)
	case "POST /orgs":
		adminCreate(w, r, s.CreateOrg)
	case "POST /repos":
		adminCreate(w, r, s.CreateRepo)
	case "POST /apps":
		adminCreate(w, r, s.CreateApp)
	case "POST /installations":
		adminCreate(w, r, s.CreateInstallation)
	case "POST /pats":
		adminCreate(w, r, func(p PAT) (map[string]string, error) { return map[string]string{"login": p.Login}, s.AddPAT(p) })
	case "POST /hooks":
		adminCreate(w, r, s.CreateHook)
	case "POST /runner-groups":
		adminCreate(w, r, s.CreateRunnerGroup)
	case "POST /jobs":
		adminCreate(w, r, s.QueueJob)
	case "POST /runs":
		adminCreate(w, r, s.QueueRun)
	case "POST /jit":
		adminCreate(w, r, func(spec JITSpec) (map[string]any, error) {
			cfg, err := s.GenerateJITConfig(spec)
			if err != nil {
				return nil, err
			}
			return map[string]any{"runner_id": cfg.RunnerID, "encoded_jit_config": cfg.Encode()}, nil
		})
	case "GET /state":
		writeJSON(w, http.StatusOK, s.Summary())
	case "GET /jobs":
		writeJSON(w, http.StatusOK, s.Jobs())
	case "GET /runners":
		writeJSON(w, http.StatusOK, s.Runners())
	case "GET /runs":
		writeJSON(w, http.StatusOK, s.Workflows().Runs())
	case "GET /scale-sets":
		writeJSON(w, http.StatusOK, s.ScaleSets())
	case "POST /scale-sets/drop-session":
		adminCreate(w, r, func(in struct {
			ID int64 `json:"id"`
		}) (map[string]int64, error) {
			return map[string]int64{"id": in.ID}, s.DropScaleSetSession(in.ID)
		})
	case "GET /deliveries":
		writeJSON(w, http.StatusOK, s.Deliveries())
	case "GET /calls":
		writeJSON(w, http.StatusOK, s.CallCounts())
	case "DELETE /calls":
		s.ResetCallCounts()
		w.WriteHeader(http.StatusNoContent)
	case "GET /routes":
		writeJSON(w, http.StatusOK, s.Routes())
	case "GET /faults":
		writeJSON(w, http.StatusOK, s.Faults())
	case "PUT /faults":
		adminPut(w, r, func(f Faults) error { s.SetFaults(f); return nil })
	case "GET /rate-limits":
		writeJSON(w, http.StatusOK, s.RateLimits())
	case "PUT /rate-limits":
		adminPut(w, r, func(rl RateLimits) error { s.SetRateLimits(rl); return nil })
	case "GET /settings":
		s.lock()
		on := s.st.failWithoutRunner
		s.unlock()
		writeJSON(w, http.StatusOK, Settings{FailJobsWithoutRunner: on})
	case "PUT /settings":
		adminPut(w, r, func(st Settings) error { s.SetFailJobsWithoutRunner(st.FailJobsWithoutRunner); return nil })
	default:
		writeError(w, http.StatusNotFound, msgNotFound)
	}
}

// Settings are the simulator's switches, as the admin API reads and writes them.
type Settings struct {
	FailJobsWithoutRunner bool `json:"fail_jobs_without_runner"`
}

func adminCreate[In, Out any](w http.ResponseWriter, r *http.Request, f func(In) (Out, error)) {
	var in In
	if e := decodeBody(r.Body, &in); e != nil {
		e.write(w)
		return
	}
	out, err := f(in)
	if err != nil {
		writeAdminError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, out)
}

func adminPut[In any](w http.ResponseWriter, r *http.Request, f func(In) error) {
	var in In
	if e := decodeBody(r.Body, &in); e != nil {
		e.write(w)
		return
	}
	if err := f(in); err != nil {
		writeAdminError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, in)
}

func writeAdminError(w http.ResponseWriter, err error) {
	var se *Error
	if errors.As(err, &se) {
		writeError(w, se.Code, se.Message)
		return
	}
	writeError(w, http.StatusInternalServerError, err.Error())
}
