package ebsstack

import (
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"
)

// KillRecord is one SIGKILL Execute sent: to Target's process Pid, in the Phase-th call of Execute, At the
// moment the signal went out; Dead is when the process was seen ended, so every log line of Target stamped
// later is a successor's.
type KillRecord struct {
	Target   string
	Pid      int
	Phase    int
	At, Dead time.Time
}

// Recovery is how long after a kill its target's successor first did work for the stack: the first operation
// in Target's log after the kill (Op), before the next kill of Target and before the kill's phase ended. A
// kill after which no operation came in that window (the phase had no work left for it) is not Measured.
type Recovery struct {
	Kill     KillRecord
	Took     time.Duration
	Op       string
	Measured bool
}

// logOp is one operation line of a process's log: when and what.
type logOp struct {
	at time.Time
	op string
}

// opMessages are the log messages (klog's quoted message) of work done: a sidecar's finished operation, at
// --v=2 (attacher/internal/handler, provisioner/internal/provision, snapshotter/internal/sidecar/handler,
// snapshotter/internal/controller), or a plugin's finished CSI call.
var opMessages = map[string]bool{
	"Attached": true, "Detached": true, "Marked attached": true,
	"Provisioned volume": true, "Deleted volume": true, "Deleted the volume of a claim deleted during provisioning": true,
	"Snapshot created": true, "Snapshot deleted": true, "Released volumesnapshotcontent": true, "Created VolumeSnapshotContent": true,
	"Volume attached": true, "Volume staged": true, "Volume unstaged": true, "Volume published": true, "Volume unpublished": true,
}

// opMethods are the CSI calls that do work: ebs-plugin logs "CSI response" with the method for every call
// that succeeded, at --v=4 as the stack runs it; Probe and the capability and info calls are not work.
var opMethods = map[string]bool{
	"CreateVolume": true, "DeleteVolume": true, "ControllerPublishVolume": true, "ControllerUnpublishVolume": true,
	"ControllerExpandVolume": true, "ControllerModifyVolume": true, "CreateSnapshot": true, "DeleteSnapshot": true,
	"NodeStageVolume": true, "NodeUnstageVolume": true, "NodePublishVolume": true, "NodeUnpublishVolume": true,
	"NodeExpandVolume": true,
}

var methodValue = regexp.MustCompile(`\bmethod="[^"]*/([A-Za-z]+)"`)

// parseOps returns the operation lines of a klog text log ("I1126 17:59:16.064535  1617 file.go:4] "msg"
// key=value..."), in order. klog's header has no year: year is the run's.
func parseOps(log string, year int) []logOp {
	var out []logOp
	for line := range strings.SplitSeq(log, "\n") {
		head, rest, ok := strings.Cut(line, `] "`)
		if !ok || len(head) < 21 || !strings.ContainsRune("IWE", rune(head[0])) {
			continue
		}
		t, err := time.Parse("0102 15:04:05.000000", head[1:21])
		if err != nil {
			continue
		}
		// klog stamps local time, as time.Now in this process reads it.
		at := time.Date(year, t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), time.Local)
		msg, kv, _ := strings.Cut(rest, `"`)
		op := ""
		switch {
		case opMessages[msg]:
			op = msg
		case msg == "CSI response":
			if m := methodValue.FindStringSubmatch(kv); m != nil && opMethods[m[1]] {
				op = m[1]
			}
		}
		if op != "" {
			out = append(out, logOp{at: at, op: op})
		}
	}
	return out
}

// recoveries finds each kill's first operation in its target's ops; phaseEnds[i] is when phase i's work was
// over (the next phase's start, or the end of the run).
func recoveries(kills []KillRecord, phaseEnds []time.Time, ops map[string][]logOp) []Recovery {
	out := make([]Recovery, 0, len(kills))
	for i, k := range kills {
		end := phaseEnds[k.Phase]
		for _, later := range kills[i+1:] {
			if later.Target == k.Target {
				if later.At.Before(end) {
					end = later.At
				}
				break
			}
		}
		r := Recovery{Kill: k}
		if j := slices.IndexFunc(ops[k.Target], func(o logOp) bool { return o.at.After(k.Dead) }); j >= 0 {
			if o := ops[k.Target][j]; o.at.Before(end) {
				r.Took, r.Op, r.Measured = o.at.Sub(k.At), o.op, true
			}
		}
		out = append(out, r)
	}
	return out
}

// Recoveries measures every kill Execute made so far from the killed processes' logs (Stack.Restart appends a
// successor's log to its predecessor's). Call it once the last phase's work is over.
func (c *Chaos) Recoveries() ([]Recovery, error) {
	c.mu.Lock()
	kills := slices.Clone(c.kills)
	ends := append(slices.Clone(c.phaseStarts[min(1, len(c.phaseStarts)):]), time.Now())
	c.mu.Unlock()
	ops := map[string][]logOp{}
	for _, k := range kills {
		if _, done := ops[k.Target]; done {
			continue
		}
		p := c.s.Process(k.Target)
		if p == nil {
			return nil, fmt.Errorf("no process %q in the stack", k.Target)
		}
		log, err := os.ReadFile(p.LogPath)
		if err != nil {
			return nil, err
		}
		ops[k.Target] = parseOps(string(log), k.At.Year())
	}
	return recoveries(kills, ends, ops), nil
}

// Line is the kill's line of the per-kill list, timed from start.
func (r Recovery) Line(start time.Time) string {
	head := fmt.Sprintf("+%6.2fs SIGKILL %s (pid %d): ", r.Kill.At.Sub(start).Seconds(), r.Kill.Target, r.Kill.Pid)
	if !r.Measured {
		return head + "no operation before its phase's work was over or the next kill"
	}
	return head + fmt.Sprintf("first operation (%s) %s later", r.Op, FormatDuration(r.Took))
}

// RecoveryReport measures the recoveries (Recoveries) and writes a line per kill, timed from NewChaos, then
// their table by component (RecoverySummary); it returns the recoveries.
func (c *Chaos) RecoveryReport(w io.Writer) ([]Recovery, error) {
	recs, err := c.Recoveries()
	if err != nil {
		return nil, err
	}
	for _, r := range recs {
		fmt.Fprintln(w, r.Line(c.start))
	}
	fmt.Fprintln(w)
	RecoverySummary(w, recs)
	return recs, nil
}
