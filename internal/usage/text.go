package usage

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// WriteText prints the summary for a person: where it comes from and its window, then
// the top n repositories and workflows by runner time, and by queue time (p99).
func (s Summary) WriteText(w io.Writer, n int) error {
	p := &printer{w: w}
	p.printf("Usage from %s, %s to %s: %d jobs, %s runner-hours, %s requested CPU core-hours.\n",
		s.Source, s.From.UTC().Format(time.DateTime), s.To.UTC().Format(time.DateTime)+" UTC",
		s.Jobs, hours(s.RunnerSeconds), hours(s.RequestedCPUSeconds))
	p.table(fmt.Sprintf("Top %d repositories by runner time", n), false, s.RunnerSeconds, top(s.Repositories, n))
	p.table(fmt.Sprintf("Top %d workflows by runner time", n), true, s.RunnerSeconds, top(s.Workflows, n))
	p.table(fmt.Sprintf("Top %d repositories by queue time (p99)", n), false, s.RunnerSeconds, top(ByQueue(s.Repositories), n))
	p.table(fmt.Sprintf("Top %d workflows by queue time (p99)", n), true, s.RunnerSeconds, top(ByQueue(s.Workflows), n))
	return p.err
}

func top(rows []Row, n int) []Row { return rows[:min(n, len(rows))] }

type printer struct {
	w   io.Writer
	err error
}

func (p *printer) printf(format string, args ...any) {
	if p.err == nil {
		_, p.err = fmt.Fprintf(p.w, format, args...)
	}
}

// table prints rows under a title: names left, figures right-aligned.
func (p *printer) table(title string, workflows bool, total float64, rows []Row) {
	p.printf("\n%s\n", title)
	if len(rows) == 0 {
		p.printf("  (none)\n")
		return
	}
	head := []string{"REPOSITORY"}
	if workflows {
		head = append(head, "WORKFLOW")
	}
	names := len(head)
	head = append(head, "JOBS", "RUNNER-HOURS", "SHARE", "CPU-CORE-HOURS", "QUEUE P50", "QUEUE P99")
	cells := [][]string{head}
	for _, r := range rows {
		line := []string{displayName(r.Repository)}
		if workflows {
			line = append(line, r.Workflow)
		}
		share := "-"
		if total > 0 {
			share = strconv.FormatFloat(100*r.RunnerSeconds/total, 'f', 1, 64) + "%"
		}
		line = append(line, strconv.Itoa(r.Jobs), hours(r.RunnerSeconds), share, hours(r.RequestedCPUSeconds), seconds(r.QueueP50), seconds(r.QueueP99))
		cells = append(cells, line)
	}
	widths := make([]int, len(head))
	for _, line := range cells {
		for i, c := range line {
			widths[i] = max(widths[i], len(c))
		}
	}
	for _, line := range cells {
		var b strings.Builder
		for i, c := range line {
			pad := strings.Repeat(" ", widths[i]-len(c))
			if i < names {
				b.WriteString("  " + c + pad)
			} else {
				b.WriteString("  " + pad + c)
			}
		}
		p.printf("%s\n", strings.TrimRight(b.String(), " "))
	}
}

// displayName is a repository label value as a person reads it.
func displayName(repo string) string {
	switch repo {
	case None:
		return "(no job)"
	case Other:
		return "(other)"
	}
	return repo
}

func hours(secs float64) string { return strconv.FormatFloat(secs/3600, 'f', 2, 64) }

func seconds(p *float64) string {
	if p == nil {
		return "-"
	}
	return strconv.FormatFloat(*p, 'f', 1, 64) + "s"
}
