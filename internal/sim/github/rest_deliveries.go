// REST handlers of webhook delivery logs: list, get and redeliver (org, repo and App hooks).

package github

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// deliveryItem is GitHub's hook-delivery-item; deliveryJSON adds request and response.
func deliveryItem(d *delivery) map[string]any {
	m := map[string]any{
		"id":              d.id,
		"guid":            d.guid,
		"delivered_at":    ts(d.created),
		"redelivery":      d.redelivery,
		"duration":        d.duration,
		"status":          "Pending",
		"status_code":     0,
		"event":           d.event,
		"action":          nilIfEmpty(d.action),
		"installation_id": nil,
		"repository_id":   nil,
		"throttled_at":    nil,
	}
	if d.done {
		m["delivered_at"] = ts(d.deliveredAt)
		m["status"] = d.status
		m["status_code"] = d.statusCode
	}
	if d.instID != 0 {
		m["installation_id"] = d.instID
	}
	if d.repoID != 0 {
		m["repository_id"] = d.repoID
	}
	return m
}

func deliveryJSON(d *delivery) map[string]any {
	m := deliveryItem(d)
	var payload map[string]any
	_ = json.Unmarshal(d.payload, &payload)
	var reqH, respH any
	if d.reqHeaders != nil {
		reqH = d.reqHeaders
	}
	if d.respHeaders != nil {
		respH = d.respHeaders
	}
	m["request"] = map[string]any{"headers": reqH, "payload": payload}
	m["response"] = map[string]any{"headers": respH, "payload": nilIfEmpty(d.respBody)}
	return m
}

// hookOf resolves the hook of a deliveries route: the App's hook for kind 0.
func (c *call) hookOf(kind scopeKind) (*hook, *apiError) {
	st := c.s.st
	if kind == 0 {
		if c.cred.app.hook == nil {
			return nil, errNotFound()
		}
		return c.cred.app.hook, nil
	}
	sc, e := c.scope(kind)
	if e != nil {
		return nil, e
	}
	id, e := c.idParam("hook_id")
	if e != nil {
		return nil, e
	}
	h := st.hooks[id]
	if h == nil || (kind == scopeOrg && h.org != sc.org) || (kind == scopeRepo && h.repo != sc.repo) {
		return nil, errNotFound()
	}
	return h, nil
}

func (c *call) deliveryOf(kind scopeKind) (*delivery, *apiError) {
	h, e := c.hookOf(kind)
	if e != nil {
		return nil, e
	}
	id, e := c.idParam("delivery_id")
	if e != nil {
		return nil, e
	}
	d := c.s.st.deliveries[id]
	if d == nil || d.hook != h {
		return nil, errNotFound()
	}
	return d, nil
}

// hListDeliveries lists a hook's deliveries newest first, paginated by cursor (the
// ID below which the next page starts) as GitHub does.
func (s *Sim) hListDeliveries(kind scopeKind) func(*call) *apiError {
	return func(c *call) *apiError {
		q := c.r.URL.Query()
		pp, _ := pageParams(q.Get("per_page"), "")
		var cursor int64
		if v := q.Get("cursor"); v != "" {
			n, err := parseCursor(v)
			if err != nil {
				return errValidation("cursor is invalid")
			}
			cursor = n
		}
		s.lock()
		defer s.unlock()
		h, e := c.hookOf(kind)
		if e != nil {
			return e
		}
		out := make([]map[string]any, 0, pp)
		var next int64
		for i := len(h.deliveries) - 1; i >= 0; i-- {
			d := h.deliveries[i]
			if cursor != 0 && d.id >= cursor {
				continue
			}
			if len(out) == pp {
				next = out[len(out)-1]["id"].(int64)
				break
			}
			out = append(out, deliveryItem(d))
		}
		if next != 0 {
			q.Set("cursor", itoa(next))
			q.Set("per_page", itoa(int64(pp)))
			c.w.Header().Set("Link", "<"+c.u.api+c.r.URL.Path[len(c.pathPrefix()):]+"?"+q.Encode()+`>; rel="next"`)
		}
		writeJSON(c.w, http.StatusOK, out)
		return nil
	}
}

func parseCursor(v string) (int64, error) {
	var n int64
	if len(v) == 0 || len(v) > 18 {
		return 0, fmt.Errorf("invalid cursor")
	}
	for _, ch := range v {
		if ch < '0' || ch > '9' {
			return 0, fmt.Errorf("invalid cursor")
		}
		n = n*10 + int64(ch-'0')
	}
	return n, nil
}

func (s *Sim) hGetDelivery(kind scopeKind) func(*call) *apiError {
	return s.locked(func(c *call) *apiError {
		d, e := c.deliveryOf(kind)
		if e != nil {
			return e
		}
		writeJSON(c.w, http.StatusOK, deliveryJSON(d))
		return nil
	})
}

func (s *Sim) hRedeliver(kind scopeKind) func(*call) *apiError {
	return s.locked(func(c *call) *apiError {
		d, e := c.deliveryOf(kind)
		if e != nil {
			return e
		}
		nd := &delivery{id: s.st.newID(), guid: d.guid, hook: d.hook, event: d.event, action: d.action,
			instID: d.instID, repoID: d.repoID, redelivery: true, payload: d.payload, created: s.now()}
		s.recordDeliveryLocked(nd)
		writeJSON(c.w, http.StatusAccepted, map[string]any{})
		return nil
	})
}
