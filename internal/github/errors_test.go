package github

import (
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestTypedErrors(t *testing.T) {
	type preds struct {
		NotFound, AlreadyExists, Busy, RateLimited, Unauthorized bool
		RetryAfter                                               time.Duration
	}
	check := func(err error) preds {
		return preds{IsNotFound(err), IsAlreadyExists(err), IsBusy(err), IsRateLimited(err), IsUnauthorized(err), RetryAfter(err)}
	}
	wrap := func(err error) error { return fmt.Errorf("reconciling: %w", fmt.Errorf("deleting runner: %w", err)) }
	tests := []struct {
		name string
		err  error
		want preds
	}{
		{"not found", wrap(NewNotFoundError("runner 1", io.EOF)), preds{NotFound: true}},
		{"already exists", wrap(NewAlreadyExistsError("runner r", nil)), preds{AlreadyExists: true}},
		{"busy", wrap(NewBusyError("runner 1", nil)), preds{Busy: true}},
		{"rate limited", wrap(NewRateLimitedError("limit", 42*time.Second)), preds{RateLimited: true, RetryAfter: 42 * time.Second}},
		{"unauthorized", wrap(NewUnauthorizedError("bad creds", nil)), preds{Unauthorized: true}},
		{"plain", errors.New("boom"), preds{}},
		{"nil", nil, preds{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, check(tt.err)); diff != "" {
				t.Errorf("predicates (-want +got):\n%s", diff)
			}
		})
	}
	err := wrap(NewNotFoundError("runner 1", io.EOF))
	if !errors.Is(err, io.EOF) {
		t.Errorf("errors.Is(%v, io.EOF) = false, want the cause kept", err)
	}
	var e *Error
	if !errors.As(err, &e) || e.Reason != ReasonNotFound || e.Error() != "runner 1: EOF" {
		t.Errorf("errors.As gave %+v", e)
	}
}
