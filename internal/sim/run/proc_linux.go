package run

import "syscall"

// procAttr puts a process in its own group (killed as one) and kills it if the process
// that started it dies.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
