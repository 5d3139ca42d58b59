package github

import (
	"errors"
	"fmt"
	"strings"
)

// Limits of a job's containers.
const (
	// MaxServices is how many service containers a simulated job may declare.
	MaxServices = 20
	// maxImageLen bounds an image reference (registry, path, tag and digest).
	maxImageLen = 512
)

// ValidateContainers checks a job's container image and its services (name → image):
// images are references without spaces, service names non-empty and short.
func ValidateContainers(container string, services map[string]string) error {
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
	return errors.Join(errs...)
}
