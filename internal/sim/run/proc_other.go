//go:build !linux

package run

import "syscall"

// procAttr puts a process in its own group (killed as one). Outside Linux there is no
// parent-death signal: a killed `gantry sim` leaves its children to the group's kill.
func procAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
