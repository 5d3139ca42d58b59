package scaleset

import (
	"context"

	"github.com/actions/scaleset"
	"github.com/actions/scaleset/listener"

	"github.com/gantry-dev/gantry/api/v1alpha1"
)

// ActionsService is the part of GitHub's Actions service Gantry uses, as
// github.com/actions/scaleset's Client speaks it: scale sets, message sessions, JIT
// configurations and runners. Errors are the client's (scaleset.RunnerNotFoundError,
// RunnerExistsError, JobStillRunningError; a 404 or 409 carries its status in the
// message: isNotFound, isSessionConflict). Clients implements it over HTTP; the tests
// use a recording fake (fake_test.go).
type ActionsService interface {
	GetRunnerGroupByName(ctx context.Context, name string) (*scaleset.RunnerGroup, error)
	GetRunnerScaleSet(ctx context.Context, runnerGroupID int, name string) (*scaleset.RunnerScaleSet, error)
	GetRunnerScaleSetByID(ctx context.Context, id int) (*scaleset.RunnerScaleSet, error)
	CreateRunnerScaleSet(ctx context.Context, ss *scaleset.RunnerScaleSet) (*scaleset.RunnerScaleSet, error)
	UpdateRunnerScaleSet(ctx context.Context, id int, ss *scaleset.RunnerScaleSet) (*scaleset.RunnerScaleSet, error)
	DeleteRunnerScaleSet(ctx context.Context, id int) error
	GenerateJitRunnerConfig(ctx context.Context, setting *scaleset.RunnerScaleSetJitRunnerSetting, scaleSetID int) (*scaleset.RunnerScaleSetJitRunnerConfig, error)
	GetRunnerByName(ctx context.Context, name string) (*scaleset.RunnerReference, error)
	// RemoveRunner: an ephemeral runner that finished its job answers nil, as GitHub's
	// service does; one never known or removed before is RunnerNotFoundError.
	RemoveRunner(ctx context.Context, id int64) error
	// OpenSession opens the scale set's one message session; 409 while another lives.
	OpenSession(ctx context.Context, scaleSetID int, owner string) (Session, error)
	// CloseSession closes the session of that id, whoever opened it (a dead leader); a
	// session already gone is nil.
	CloseSession(ctx context.Context, scaleSetID int, sessionID string) error
}

// Session is an open message session: the listener's client, and Close, which deletes
// it on the service.
type Session interface {
	listener.Client
	Close(ctx context.Context) error
}

// Services gives a pool's ActionsService (Clients, or a fake in tests). For returns the
// errors of controller.GitHubResolver.For (*controller.ConfigError,
// *controller.UnavailableError).
type Services interface {
	For(ctx context.Context, pool *v1alpha1.RunnerPool) (ActionsService, error)
}

// service is an ActionsService over the scaleset client.
type service struct {
	*scaleset.Client
	closer *sessionCloser
}

func (s service) CloseSession(ctx context.Context, scaleSetID int, sessionID string) error {
	return s.closer.close(ctx, scaleSetID, sessionID)
}

func (s service) OpenSession(ctx context.Context, scaleSetID int, owner string) (Session, error) {
	sess, err := s.MessageSessionClient(ctx, scaleSetID, owner)
	if err != nil {
		return nil, err
	}
	return sess, nil
}
