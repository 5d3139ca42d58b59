package main

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestTrimKeepsTheFieldsDocsAndDropsThoseBeneathTheTemplate(t *testing.T) {
	in := `---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
spec:
  versions:
  - name: v1alpha1
    schema:
      openAPIV3Schema:
        description: A pool.
        properties:
          spec:
            description: The spec.
            properties:
              minIdle:
                description: Warm runners.
                type: integer
              template:
                description: The pod.
                properties:
                  spec:
                    description: Pod spec.
                    properties:
                      containers:
                        description: Containers.
                        items:
                          description: A container.
                          properties:
                            description:
                              description: A property named description stays.
                              type: string
                          type: object
                        type: array
                    type: object
                type: object
            type: object
        type: object
`
	want := `---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
spec:
  versions:
    - name: v1alpha1
      schema:
        openAPIV3Schema:
          description: A pool.
          properties:
            spec:
              description: The spec.
              properties:
                minIdle:
                  description: Warm runners.
                  type: integer
                template:
                  description: The pod.
                  properties:
                    spec:
                      properties:
                        containers:
                          items:
                            properties:
                              description:
                                type: string
                            type: object
                          type: array
                      type: object
                  type: object
              type: object
          type: object
`
	got, err := trim([]byte(in), [][]string{strings.Split("spec.template", ".")})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, string(got)); diff != "" {
		t.Errorf("trimmed CRD (-want +got):\n%s", diff)
	}
}

func TestTrimRefusesWhatIsNotACRD(t *testing.T) {
	if _, err := trim([]byte("kind: ConfigMap\n"), nil); err == nil {
		t.Error("a document without spec.versions was accepted")
	}
}
