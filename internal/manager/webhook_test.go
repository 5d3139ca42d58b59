package manager

import "testing"

func TestWebhookEndpointRoundTrip(t *testing.T) {
	for _, addr := range []string{"10.1.2.3:9090", "[fd00::1:2]:9090", "gantry-0.gantry.ns.svc:9090"} {
		v, err := encodeEndpoint(addr)
		if err != nil {
			t.Errorf("encodeEndpoint(%q): %v", addr, err)
			continue
		}
		if got := decodeEndpoint(v); got != addr {
			t.Errorf("decodeEndpoint(encodeEndpoint(%q)) = %q (label %q)", addr, got, v)
		}
	}
	for _, bad := range []string{"", "10.1.2.3", ":9090"} {
		if _, err := encodeEndpoint(bad); err == nil {
			t.Errorf("encodeEndpoint(%q): want an error", bad)
		}
	}
	if got := decodeEndpoint(""); got != "" {
		t.Errorf("decodeEndpoint of no label = %q, want empty", got)
	}
}
