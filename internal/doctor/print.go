package doctor

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// marks are what a person sees first in the table.
var marks = map[Status]string{OK: "✓", Problem: "✗", Skipped: "-"}

// WriteText prints the report as tables: one line per check, a fix under each problem,
// then the job's route and a summary line.
func (r *Report) WriteText(out io.Writer) error {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "POOL\tCHECK\t\tRESULT")
	for _, p := range r.Pools {
		for _, c := range p.Checks {
			writeCheck(tw, p.Pool, c)
		}
	}
	for _, c := range r.Install {
		writeCheck(tw, "-", c)
	}
	for _, c := range r.Problems {
		writeCheck(tw, "-", c)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if rt := r.Route; rt != nil {
		fmt.Fprintf(out, "\nA job of %s (%s) with runs-on [%s]:\n", rt.Repository, rt.Host, strings.Join(rt.Labels, ", "))
		tw = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "POOL\t\tWHY")
		for _, d := range rt.Pools {
			mark := marks[Problem]
			if d.Takes {
				mark = marks[OK]
			} else if d.Matches {
				mark = "~"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\n", d.Pool, mark, d.Why)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	n := r.ProblemCount()
	switch n {
	case 0:
		_, err := fmt.Fprintf(out, "\nNo problem found (%d pools).\n", len(r.Pools))
		return err
	case 1:
		_, err := fmt.Fprintln(out, "\n1 problem found: see the fix under it and docs/troubleshooting.md.")
		return err
	}
	_, err := fmt.Fprintf(out, "\n%d problems found: see the fix under each and docs/troubleshooting.md.\n", n)
	return err
}

func writeCheck(tw io.Writer, pool string, c Check) {
	result := c.Message
	if c.Result != "" {
		result = string(c.Result) + ": " + c.Message
	}
	fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", pool, c.Name, marks[c.Status], result)
	if c.Fix != "" {
		fmt.Fprintf(tw, "\t\t\tfix: %s\n", c.Fix)
	}
}

// WriteJSON prints the report as one indented JSON document, with the problem count.
func (r *Report) WriteJSON(out io.Writer) error {
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(struct {
		*Report
		ProblemCount int `json:"problemCount"`
	}{r, r.ProblemCount()})
}
