// Command kubectl is kubectl itself, built from k8s.io/kubectl at the version helm in
// this module pins, so that the docs tests run the commands users copy with a real
// kubectl and without downloading a binary:
//
//	cd hack/helm && go build -o ../../bin/kubectl ./kubectl
package main

import (
	"k8s.io/component-base/cli"
	"k8s.io/kubectl/pkg/cmd"
	"k8s.io/kubectl/pkg/cmd/util"
)

func main() {
	command := cmd.NewDefaultKubectlCommand()
	if err := cli.RunNoErrOutput(command); err != nil {
		util.CheckErr(err)
	}
}
