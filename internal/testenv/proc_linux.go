package testenv

import "syscall"

// procAttr puts a child in its own process group, killed with the test binary.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
