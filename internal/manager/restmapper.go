package manager

import (
	"net/http"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// newRESTMapper is controller-runtime's dynamic REST mapper with its RESTMapping answers
// remembered. The client and the cache ask it on every Get, List, Create and Patch
// whether a kind is namespaced, and each answer walks every API group the mapper has
// loaded: about a twentieth of the controller's CPU under load. The kinds Gantry uses
// keep their mapping for the life of the process.
func newRESTMapper(c *rest.Config, hc *http.Client) (meta.RESTMapper, error) {
	m, err := apiutil.NewDynamicRESTMapper(c, hc)
	if err != nil {
		return nil, err
	}
	return &rememberingMapper{RESTMapper: m}, nil
}

// rememberingMapper answers RESTMapping from what it answered before; a kind it could
// not map is asked of the mapper again each time, so a CRD installed later is found.
type rememberingMapper struct {
	meta.RESTMapper
	known sync.Map // mappingKey → *meta.RESTMapping
}

type mappingKey struct {
	gk       schema.GroupKind
	versions string
}

func (m *rememberingMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	k := mappingKey{gk, strings.Join(versions, ",")}
	if v, ok := m.known.Load(k); ok {
		return v.(*meta.RESTMapping), nil
	}
	mapping, err := m.RESTMapper.RESTMapping(gk, versions...)
	if err != nil {
		return nil, err
	}
	m.known.Store(k, mapping)
	return mapping, nil
}
