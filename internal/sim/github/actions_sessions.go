// Actions service handlers: message sessions, the message queue (long poll and
// acknowledgement) and job acquisition.

package github

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/google/uuid"
)

func (s *Sim) sessionJSON(c *call, se *session) map[string]any {
	ss := se.set
	return map[string]any{
		"sessionId":               se.id,
		"ownerName":               se.owner,
		"runnerScaleSet":          s.scaleSetJSON(ss),
		"messageQueueUrl":         c.u.api + actionsPrefix + "/_apis/runtime/runnerscalesets/" + itoa(ss.id) + "/messages?sessionId=" + se.id,
		"messageQueueAccessToken": se.queueToken,
		"statistics":              ss.stats(),
	}
}

// newQueueTokenLocked gives se a fresh queue token.
func (s *Sim) newQueueTokenLocked(se *session) {
	delete(s.st.actions.queueTokens, se.queueToken)
	se.queueToken = randomToken("simq_", 40, false)
	se.expires = s.now().Add(s.opts.MessageQueueTokenTTL)
	s.st.actions.queueTokens[se.queueToken] = se
}

// hCreateSession is POST …/{id}/sessions {ownerName}: one session per scale set; while
// another lives (used within Options.ActionsSessionTimeout, or polling), 409
// RunnerScaleSetSessionConflictException.
func (s *Sim) hCreateSession(c *call, ss *scaleSet) *apiError {
	var b struct {
		OwnerName string `json:"ownerName"`
	}
	if e := decodeBody(c.r.Body, &b); e != nil {
		return e
	}
	s.reassignLocked()
	if s.sessionAliveLocked(ss) {
		return actionsError(http.StatusConflict, "RunnerScaleSetSessionConflictException",
			"The actions runner scale set "+ss.name+" already has an active session for owner "+ss.session.owner+".")
	}
	se := &session{id: uuid.NewString(), owner: b.OwnerName, set: ss, seen: s.now()}
	s.newQueueTokenLocked(se)
	ss.session = se
	s.st.actions.sessions[se.id] = se
	writeJSON(c.w, http.StatusOK, s.sessionJSON(c, se))
	return nil
}

// sessionOf finds the live session {session_id} of ss (404 when it is gone).
func (s *Sim) sessionOf(c *call, ss *scaleSet) (*session, *apiError) {
	se := s.st.actions.sessions[c.param("session_id")]
	if se == nil || se.set != ss || !s.sessionAliveLocked(ss) || ss.session != se {
		return nil, actionsError(http.StatusNotFound, "TaskAgentSessionExpiredException",
			"The session "+c.param("session_id")+" has expired or was deleted.")
	}
	return se, nil
}

// hRefreshSession is PATCH …/{id}/sessions/{session_id}: a new queue token.
func (s *Sim) hRefreshSession(c *call, ss *scaleSet) *apiError {
	se, e := s.sessionOf(c, ss)
	if e != nil {
		return e
	}
	se.seen = s.now()
	s.newQueueTokenLocked(se)
	writeJSON(c.w, http.StatusOK, s.sessionJSON(c, se))
	return nil
}

func (s *Sim) hDeleteSession(c *call, ss *scaleSet) *apiError {
	se, e := s.sessionOf(c, ss)
	if e != nil {
		return e
	}
	s.closeSessionLocked(se)
	c.w.WriteHeader(http.StatusNoContent)
	return nil
}

// queueSession checks that the queue token's session is the live one of scale set
// {id}: 401 otherwise, so the client refreshes (and meets 404 if it is gone).
func (s *Sim) queueSession(c *call) (*session, *apiError) {
	se := c.svc.session
	if se == nil || itoa(se.set.id) != c.param("id") || se.set.session != se || se.set.deleted {
		return nil, actionsError(http.StatusUnauthorized, "UnauthorizedRequestException", "The message queue token is not valid.")
	}
	return se, nil
}

// hGetMessage is the long poll GET …/{id}/messages?lastMessageId=N: the oldest
// unacknowledged message after N at once, else a new message of at most 50 waiting
// job messages, else 202 after Options.ActionsPollHold. Every message carries the
// scale set's statistics.
func (s *Sim) hGetMessage(c *call) *apiError {
	last, _ := strconv.ParseInt(c.r.URL.Query().Get("lastMessageId"), 10, 64)
	s.lock()
	se, e := s.queueSession(c)
	if e != nil {
		s.unlock()
		return e
	}
	se.polls++
	ss := se.set
	s.unlock()
	defer func() {
		s.lock()
		se.polls--
		se.seen = s.now()
		s.unlock()
	}()
	timer := s.clk.NewTimer(s.opts.ActionsPollHold)
	defer timer.Stop()
	for {
		s.lock()
		if ss.session != se || ss.deleted {
			s.unlock()
			return actionsError(http.StatusUnauthorized, "UnauthorizedRequestException", "The message session was closed.")
		}
		s.reassignLocked()
		if m := ss.nextMessage(last); m != nil {
			out := map[string]any{"messageId": m.id, "messageType": "RunnerScaleSetJobMessages", "body": m.body, "statistics": ss.stats()}
			se.delivered = max(se.delivered, m.id)
			s.unlock()
			writeJSON(c.w, http.StatusOK, out)
			return nil
		}
		s.unlock()
		select {
		case <-ss.notify:
		case <-timer.C():
			c.w.WriteHeader(http.StatusAccepted)
			return nil
		case <-c.r.Context().Done():
			return nil
		}
	}
}

// nextMessage is the oldest unacknowledged message after last, or a new one made of
// the waiting job messages (at most maxJobMessages), or nil.
func (ss *scaleSet) nextMessage(last int64) *queueMessage {
	for _, m := range ss.unacked {
		if m.id > last {
			return m
		}
	}
	if len(ss.pending) == 0 {
		return nil
	}
	n := min(len(ss.pending), maxJobMessages)
	var b strings.Builder
	b.WriteByte('[')
	for i, jm := range ss.pending[:n] {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(jm)
	}
	b.WriteByte(']')
	ss.pending = ss.pending[n:]
	m := &queueMessage{id: ss.nextMsg, body: b.String()}
	ss.nextMsg++
	ss.unacked = append(ss.unacked, m)
	return m
}

// hAckMessage is DELETE …/{id}/messages/{message_id}: the message is acknowledged
// and never comes again.
func (s *Sim) hAckMessage(c *call, ss *scaleSet) *apiError {
	if _, e := s.queueSession(c); e != nil {
		return e
	}
	id := parseID(c.param("message_id"))
	for i, m := range ss.unacked {
		if m.id == id {
			ss.unacked = append(ss.unacked[:i:i], ss.unacked[i+1:]...)
			c.w.WriteHeader(http.StatusNoContent)
			return nil
		}
	}
	return actionsError(http.StatusNotFound, "MessageNotFoundException", "Message "+c.param("message_id")+" not found.")
}

// hAcquireJobs is POST …/{id}/acquirejobs [runnerRequestId…]: the scale set takes the
// jobs offered to it (JobAssigned follows) and its idle runners get them; it answers
// the IDs it acquired.
func (s *Sim) hAcquireJobs(c *call, ss *scaleSet) *apiError {
	if c.svc.session != nil {
		if _, e := s.queueSession(c); e != nil {
			return e
		}
	}
	var ids []int64
	if e := decodeBody(c.r.Body, &ids); e != nil {
		return e
	}
	got := []int64{}
	for _, id := range ids {
		j := s.st.actions.requests[id]
		if j == nil || j.scaleSet() != ss || j.status != StatusQueued {
			continue
		}
		if !j.ss.acquired {
			j.ss.acquired = true
			s.jobMessageLocked(j, msgJobAssigned, nil)
		}
		got = append(got, id)
	}
	s.feedScaleSetLocked(ss)
	writeJSON(c.w, http.StatusOK, map[string]any{"count": len(got), "value": got})
	return nil
}
