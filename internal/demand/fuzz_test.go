package demand

import (
	"testing"
)

func FuzzParseWorkflowJob(f *testing.F) {
	f.Add(payload("queued", 1, "self-hosted", "linux"))
	f.Add(payload("completed", 2))
	f.Add([]byte(`{"action":"queued","workflow_job":{"id":1},"repository":{"name":"r","owner":{"login":"o"},"html_url":"::"}}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, body []byte) {
		ev, err := ParseWorkflowJob(body)
		if err != nil {
			return
		}
		if ev.Job.ID == 0 || ev.Job.Owner == "" || ev.Job.Repo == "" || ev.Job.Host == "" || ev.Action == "" {
			t.Fatalf("accepted an event without its identity: %+v", ev)
		}
	})
}

func FuzzVerifySignature(f *testing.F) {
	body := payload("queued", 1, "linux")
	f.Add(body, Sign(testSecret, body))
	f.Add(body, "sha256=")
	f.Add([]byte{}, "sha256=00")
	f.Fuzz(func(t *testing.T, body []byte, header string) {
		err := VerifySignature([][]byte{testSecret}, body, header)
		if err == nil && header != Sign(testSecret, body) {
			// hex is case-insensitive: an upper-case digest of the same MAC is fine.
			if len(header) != len(Sign(testSecret, body)) {
				t.Fatalf("accepted header %q for a body it does not sign", header)
			}
		}
		if got := VerifySignature([][]byte{testSecret}, body, Sign(testSecret, body)); got != nil {
			t.Fatalf("refused GitHub's own signature: %v", got)
		}
	})
}
