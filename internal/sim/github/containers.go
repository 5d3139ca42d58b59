package github

import (
	"errors"
	"fmt"
	"strings"

	"github.com/gantry-dev/gantry/internal/sim/github/runnerapi"
)

// Limits of a job's containers.
const (
	// MaxServices is how many service containers a simulated job may declare.
	MaxServices = 20
	// maxImageLen bounds an image reference (registry, path, tag and digest).
	maxImageLen = 512
	// maxPorts bounds a container's ports, maxSteps a job's container steps.
	maxPorts = 20
	maxSteps = 20
)

// ValidateContainers checks a job's container image, its services (name → image) and
// their options: images are references without spaces, service names non-empty and
// short; ports name a declared container, container steps are an image action or a
// Dockerfile action, and options need a container.
func ValidateContainers(container string, services map[string]string, opts *runnerapi.ContainerOptions) error {
	var errs []error
	checkImage := func(what, image string) {
		if image == "" || len(image) > maxImageLen || strings.ContainsAny(image, " \t\r\n\x00") {
			errs = append(errs, fmt.Errorf("%s image %q must be 1–%d characters without spaces", what, image, maxImageLen))
		}
	}
	if container != "" {
		checkImage("container", container)
	}
	if len(services) > MaxServices {
		errs = append(errs, fmt.Errorf("a job may have at most %d services, got %d", MaxServices, len(services)))
	}
	for name, image := range services {
		if name == "" || len(name) > 100 || strings.ContainsAny(name, " \t\r\n\x00") {
			errs = append(errs, fmt.Errorf("service name %q must be 1–100 characters without spaces", name))
		}
		checkImage("service "+name, image)
	}
	if opts != nil {
		errs = append(errs, validateContainerOptions(container, services, opts)...)
	}
	return errors.Join(errs...)
}

func validateContainerOptions(container string, services map[string]string, o *runnerapi.ContainerOptions) []error {
	var errs []error
	if container == "" && (len(o.Ports) > 0 || o.Credentials || len(o.Steps) > 0) {
		errs = append(errs, errors.New("container ports, credentials and steps need a job container"))
	}
	checkPorts := func(what string, ports []string) {
		if len(ports) > maxPorts {
			errs = append(errs, fmt.Errorf("%s may have at most %d ports", what, maxPorts))
		}
		for _, p := range ports {
			if p == "" || len(p) > 32 || strings.ContainsAny(p, " \t\r\n\x00") {
				errs = append(errs, fmt.Errorf("%s port %q must be 1–32 characters without spaces", what, p))
			}
		}
	}
	checkPorts("the job container", o.Ports)
	for name, ports := range o.ServicePorts {
		if _, ok := services[name]; !ok {
			errs = append(errs, fmt.Errorf("service_ports names %q, which is not a service of the job", name))
		}
		checkPorts("service "+name, ports)
	}
	if len(o.Steps) > maxSteps {
		errs = append(errs, fmt.Errorf("a job may have at most %d container steps", maxSteps))
	}
	for _, st := range o.Steps {
		if (st.Image == "") == (st.Action == "") {
			errs = append(errs, fmt.Errorf("container step %q must have an image (an image action) or an action (a Dockerfile action), not both", st.Name))
		}
		if st.Image != "" && (len(st.Image) > maxImageLen || strings.ContainsAny(st.Image, " \t\r\n\x00")) {
			errs = append(errs, fmt.Errorf("container step %q: image %q must be 1–%d characters without spaces", st.Name, st.Image, maxImageLen))
		}
	}
	return errs
}
