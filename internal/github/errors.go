package github

import (
	"errors"
	"time"
)

// Reason classifies the errors callers act on differently. Any other failure (5xx,
// network errors, malformed responses) is an ordinary error: retry with backoff.
type Reason string

const (
	// ReasonNotFound: the runner, group or scope does not exist (404). For deletes it
	// means the work is already done.
	ReasonNotFound Reason = "NotFound"
	// ReasonAlreadyExists: a runner with that name is already registered (422 from
	// generate-jitconfig).
	ReasonAlreadyExists Reason = "AlreadyExists"
	// ReasonBusy: the runner is running a job and cannot be removed (422 from DELETE).
	ReasonBusy Reason = "Busy"
	// ReasonRateLimited: GitHub's primary or secondary rate limit is exhausted for the
	// credential; no call is sent before RetryAfter has passed.
	ReasonRateLimited Reason = "RateLimited"
	// ReasonUnauthorized: GitHub rejected the credentials (401), denied them access
	// (403 that is not a rate limit), or they cannot serve the scope (a GitHub App
	// for an enterprise). Retrying won't help: fix the Secret or the App's permissions.
	ReasonUnauthorized Reason = "Unauthorized"
	// ReasonAppNotInstalled: GitHub has no installation with the credentials'
	// installation id (404 on the installation token): the App was uninstalled or the
	// id is wrong. IsUnauthorized is true for it too.
	ReasonAppNotInstalled Reason = "AppNotInstalled"
	// ReasonRunInProgress: GitHub re-runs a job only once its whole workflow run has
	// completed (403 "… is already running"); ask again later.
	ReasonRunInProgress Reason = "RunInProgress"
	// ReasonNotRerunnable: GitHub will not re-run the job or run (403 "… cannot be
	// retried"): it was re-run 50 times, or the job is not of the run's latest attempt.
	ReasonNotRerunnable Reason = "NotRerunnable"
)

// ErrNoSuchRunnerGroup is wrapped by the NotFound error of a runner group lookup whose
// scope exists but has no group of that name.
var ErrNoSuchRunnerGroup = errors.New("no such runner group")

// Error is a classified GitHub failure. Match it with the Is* predicates or errors.As.
// Its message never contains a token, private key or JIT configuration.
type Error struct {
	// Reason classifies the failure.
	Reason Reason
	// Message says what failed, for humans.
	Message string
	// RetryAfter is how long to wait before calling again (RateLimited only).
	RetryAfter time.Duration
	// Err is the underlying error, if any.
	Err error
}

// Error implements error.
func (e *Error) Error() string {
	if e.Err != nil {
		return e.Message + ": " + e.Err.Error()
	}
	return e.Message
}

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

// NewNotFoundError returns a NotFound error.
func NewNotFoundError(msg string, err error) error {
	return &Error{Reason: ReasonNotFound, Message: msg, Err: err}
}

// NewAlreadyExistsError returns an AlreadyExists error.
func NewAlreadyExistsError(msg string, err error) error {
	return &Error{Reason: ReasonAlreadyExists, Message: msg, Err: err}
}

// NewBusyError returns a Busy error.
func NewBusyError(msg string, err error) error {
	return &Error{Reason: ReasonBusy, Message: msg, Err: err}
}

// NewRateLimitedError returns a RateLimited error that asks callers to wait retryAfter.
func NewRateLimitedError(msg string, retryAfter time.Duration) error {
	return &Error{Reason: ReasonRateLimited, Message: msg, RetryAfter: retryAfter}
}

// NewUnauthorizedError returns an Unauthorized error.
func NewUnauthorizedError(msg string, err error) error {
	return &Error{Reason: ReasonUnauthorized, Message: msg, Err: err}
}

// NewAppNotInstalledError returns an AppNotInstalled error.
func NewAppNotInstalledError(msg string, err error) error {
	return &Error{Reason: ReasonAppNotInstalled, Message: msg, Err: err}
}

// NewRunInProgressError returns a RunInProgress error.
func NewRunInProgressError(msg string, err error) error {
	return &Error{Reason: ReasonRunInProgress, Message: msg, Err: err}
}

// NewNotRerunnableError returns a NotRerunnable error.
func NewNotRerunnableError(msg string, err error) error {
	return &Error{Reason: ReasonNotRerunnable, Message: msg, Err: err}
}

// ReasonOf returns the Reason of the first *Error in err's chain, or "" if there is none.
func ReasonOf(err error) Reason {
	if e, ok := errors.AsType[*Error](err); ok {
		return e.Reason
	}
	return ""
}

// IsNotFound reports whether err says the object does not exist on GitHub.
func IsNotFound(err error) bool { return ReasonOf(err) == ReasonNotFound }

// IsAlreadyExists reports whether err says a runner with that name already exists.
func IsAlreadyExists(err error) bool { return ReasonOf(err) == ReasonAlreadyExists }

// IsBusy reports whether err says the runner is running a job.
func IsBusy(err error) bool { return ReasonOf(err) == ReasonBusy }

// IsRateLimited reports whether err says the credential is rate limited; see RetryAfter.
func IsRateLimited(err error) bool { return ReasonOf(err) == ReasonRateLimited }

// IsUnauthorized reports whether err says the credentials are rejected, lack
// permission, or cannot serve the scope (an App not installed included).
func IsUnauthorized(err error) bool {
	r := ReasonOf(err)
	return r == ReasonUnauthorized || r == ReasonAppNotInstalled
}

// IsRunInProgress reports whether err says the job's workflow run has not completed.
func IsRunInProgress(err error) bool { return ReasonOf(err) == ReasonRunInProgress }

// IsNotRerunnable reports whether err says GitHub will not re-run the job or run.
func IsNotRerunnable(err error) bool { return ReasonOf(err) == ReasonNotRerunnable }

// IsAppNotInstalled reports whether err says the App's installation does not exist.
func IsAppNotInstalled(err error) bool { return ReasonOf(err) == ReasonAppNotInstalled }

// RetryAfter returns how long a RateLimited err asks callers to wait, or 0 for any
// other error.
func RetryAfter(err error) time.Duration {
	if e, ok := errors.AsType[*Error](err); ok && e.Reason == ReasonRateLimited {
		return e.RetryAfter
	}
	return 0
}
