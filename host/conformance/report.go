package conformance

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// Outcome is the result of one check.
type Outcome string

// The outcomes of a check.
const (
	Pass Outcome = "pass"
	Fail Outcome = "FAIL"
	// Skip: the check does not apply (a capability the plugin does not claim) or cannot
	// run (an earlier failure made it moot).
	Skip Outcome = "skip"
)

// Result is one check's finding.
type Result struct {
	// Check names what was checked: "descriptor: abi version", "tool calc: valid
	// input (required properties only)", "model echo: streaming", ...
	Check    string        `json:"check"`
	Outcome  Outcome       `json:"result"`
	Detail   string        `json:"detail,omitempty"`
	Duration time.Duration `json:"-"`
	Millis   int64         `json:"ms"`
}

// Report is what the suite found about one plugin.
type Report struct {
	Plugin  string   `json:"plugin"`
	Version string   `json:"version,omitempty"`
	SHA256  string   `json:"sha256"`
	Passed  bool     `json:"passed"`
	Results []Result `json:"results"`
}

// Failed returns the failing results.
func (r *Report) Failed() []Result {
	var out []Result
	for _, res := range r.Results {
		if res.Outcome == Fail {
			out = append(out, res)
		}
	}
	return out
}

// Find returns the results whose check name contains part.
func (r *Report) Find(part string) []Result {
	var out []Result
	for _, res := range r.Results {
		if strings.Contains(res.Check, part) {
			out = append(out, res)
		}
	}
	return out
}

// WriteTable writes the report as a table for people: check, result, detail (cut to a
// line), then each failure's full detail, then a summary line.
func (r *Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "CHECK\tRESULT\tDETAIL\n")
	for _, res := range r.Results {
		detail := strings.ReplaceAll(res.Detail, "\n", " ")
		if len(detail) > 160 {
			detail = detail[:157] + "..."
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", res.Check, res.Outcome, detail)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	// The table cuts details to a line; a failure is worth reading whole.
	for i, res := range r.Failed() {
		if i == 0 {
			fmt.Fprintf(w, "\nFAILURES\n")
		}
		fmt.Fprintf(w, "\n%s:\n  %s\n", res.Check, strings.ReplaceAll(res.Detail, "\n", "\n  "))
	}
	pass, fail, skip := 0, 0, 0
	for _, res := range r.Results {
		switch res.Outcome {
		case Pass:
			pass++
		case Fail:
			fail++
		case Skip:
			skip++
		}
	}
	verdict := "conforms"
	if !r.Passed {
		verdict = "DOES NOT CONFORM"
	}
	_, err := fmt.Fprintf(w, "\nplugin %s %s (sha256 %s): %s — %d passed, %d failed, %d skipped\n",
		r.Plugin, r.Version, short(r.SHA256), verdict, pass, fail, skip)
	return err
}

// WriteJSON writes the report as JSON, for CI.
func (r *Report) WriteJSON(w io.Writer) error {
	for i := range r.Results {
		r.Results[i].Millis = r.Results[i].Duration.Milliseconds()
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

func short(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}
