package run

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
)

// processCPU is the CPU time, in seconds, used so far by this process (the GitHub
// simulator, the runner agents, the sampler: "harness") and by each of its child
// processes by executable name (the control plane, kwok, the controller): where a
// run's CPU went. Linux; clock ticks of 1/100 s.
func processCPU() map[string]float64 {
	out := map[string]float64{}
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err == nil {
		out["harness"] = round1(tv(ru.Utime) + tv(ru.Stime))
	}
	self := os.Getpid()
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		name, ppid, cpu, ok := parseStat(string(b))
		if !ok || ppid != self {
			continue
		}
		if name == filepath.Base(os.Args[0]) || strings.HasPrefix(name, "gantry") {
			name = "gantry controller"
		}
		out[name] = round1(out[name] + cpu)
	}
	return out
}

// procCPUSeconds is the user+system CPU time, in seconds, process pid used so far.
func procCPUSeconds(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("reading the controller's CPU time: %w", err)
	}
	_, _, cpu, ok := parseStat(string(b))
	if !ok {
		return 0, fmt.Errorf("reading the controller's CPU time: /proc/%d/stat unreadable", pid)
	}
	return cpu, nil
}

// parseStat reads the command name, parent pid and user+system CPU seconds of a
// /proc/PID/stat line.
func parseStat(s string) (name string, ppid int, cpu float64, ok bool) {
	open, closing := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || closing < open || closing+2 > len(s) {
		return "", 0, 0, false
	}
	name = s[open+1 : closing]
	f := strings.Fields(s[closing+2:])
	// After the name: state, ppid, …, utime and stime are the 2nd, 12th and 13th.
	if len(f) < 13 {
		return "", 0, 0, false
	}
	ppid, err1 := strconv.Atoi(f[1])
	ut, err2 := strconv.ParseFloat(f[11], 64)
	st, err3 := strconv.ParseFloat(f[12], 64)
	if err1 != nil || err2 != nil || err3 != nil || math.IsNaN(ut+st) {
		return "", 0, 0, false
	}
	return name, ppid, (ut + st) / 100, true
}

func formatCPU(m map[string]float64) string {
	var parts []string
	for _, k := range sortedKeys(m) {
		parts = append(parts, fmt.Sprintf("%s %.1f", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

func sortedKeys(m map[string]float64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
