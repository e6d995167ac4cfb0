package conformance

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func sampleRun() Run {
	return Run{
		E2ETest: "/bin/e2e.test", Kubeconfig: "/k/admin.conf", TestData: "/td", DriverFile: "driver.yaml",
		Focus: "External.Storage", Skip: "(x)", ReportDir: "/reports", Timeout: time.Hour,
	}
}

// TestCommandRunsE2ETestAloneOrUnderGinkgo checks both ways of running the suite: e2e.test alone takes the
// spec flags prefixed with "ginkgo."; Ginkgo's command line takes them bare, before the binary, and passes
// e2e.test's own flags after "--".
func TestCommandRunsE2ETestAloneOrUnderGinkgo(t *testing.T) {
	r := sampleRun()
	name, args := r.Command()
	if name != "/bin/e2e.test" {
		t.Errorf("alone: runs %s, want e2e.test", name)
	}
	for _, want := range []string{"-kubeconfig=/k/admin.conf", "-storage.testdriver=/td/driver.yaml", "-repo-root=/td",
		"-ginkgo.focus=External.Storage", "-ginkgo.skip=(x)", "-ginkgo.junit-report=/reports/junit.xml", "-ginkgo.timeout=1h0m0s"} {
		if !slices.Contains(args, want) {
			t.Errorf("alone: args %q lack %q", args, want)
		}
	}
	if slices.ContainsFunc(args, func(a string) bool { return strings.Contains(a, "label-filter") }) {
		t.Errorf("alone: args %q filter labels though the run sets none", args)
	}

	r.Ginkgo, r.Procs, r.LabelFilter = "/bin/ginkgo", 3, "!Serial"
	name, args = r.Command()
	if name != "/bin/ginkgo" || len(args) < 2 || args[0] != "run" || args[1] != "--procs=3" {
		t.Fatalf("under Ginkgo: %s %q, want ginkgo run --procs=3 ...", name, args)
	}
	sep := slices.Index(args, "--")
	if sep < 1 || args[sep-1] != "/bin/e2e.test" {
		t.Fatalf("under Ginkgo: args %q do not end in e2e.test -- <its flags>", args)
	}
	before, after := args[:sep], args[sep+1:]
	for _, want := range []string{"--focus=External.Storage", "--skip=(x)", "--label-filter=!Serial", "--junit-report=/reports/junit.xml"} {
		if !slices.Contains(before, want) {
			t.Errorf("under Ginkgo: Ginkgo's flags %q lack %q", before, want)
		}
	}
	if !slices.Contains(after, "-kubeconfig=/k/admin.conf") || slices.ContainsFunc(after, func(a string) bool { return strings.Contains(a, "ginkgo.") }) {
		t.Errorf("under Ginkgo: e2e.test's flags %q, want its own and no ginkgo.* flag", after)
	}
}

// TestPassesSplitSerialSpecsOut checks the two passes of a full run: every spec that can share the cluster in
// parallel under Ginkgo, then the [Serial] and [Disruptive] ones in one process, each reporting on its own.
func TestPassesSplitSerialSpecsOut(t *testing.T) {
	ps := sampleRun().Passes("/bin/ginkgo", 4)
	if len(ps) != 2 {
		t.Fatalf("%d passes, want 2", len(ps))
	}
	par, ser := ps[0], ps[1]
	if par.Ginkgo != "/bin/ginkgo" || par.Procs != 4 || par.LabelFilter != "!Serial && !Disruptive" || par.JUnit() != "/reports/parallel/junit.xml" {
		t.Errorf("parallel pass %+v", par)
	}
	if ser.Ginkgo != "" || ser.Procs != 1 || ser.LabelFilter != "Serial || Disruptive" || ser.JUnit() != "/reports/serial/junit.xml" {
		t.Errorf("serial pass %+v", ser)
	}
	for _, p := range ps {
		if p.Focus != "External.Storage" || p.Skip != "(x)" {
			t.Errorf("a pass changed the run's focus or skip: %+v", p)
		}
	}
}

// TestMergeResultsTakesTheResultOfThePassThatRanTheSpec checks that a spec one pass left out and the other ran
// counts once, as it ran, and that a setup node's failure in either pass stays.
func TestMergeResultsTakesTheResultOfThePassThatRanTheSpec(t *testing.T) {
	setup := "[SynchronizedBeforeSuite]"
	first := []Result{
		{Name: setup, Status: Passed},
		{Name: "a", Status: Passed},
		{Name: "b [Serial]", Status: NotRun},
		{Name: "c", Status: Skipped, Message: "why"},
	}
	second := []Result{
		{Name: setup, Status: Failed, Message: "boom"},
		{Name: "a", Status: NotRun},
		{Name: "b [Serial]", Status: Failed, Message: "broke"},
		{Name: "c", Status: NotRun},
		{Name: "d", Status: NotRun},
	}
	got := MergeResults(first, second)
	want := []Result{
		{Name: setup, Status: Failed, Message: "boom"},
		{Name: "a", Status: Passed},
		{Name: "b [Serial]", Status: Failed, Message: "broke"},
		{Name: "c", Status: Skipped, Message: "why"},
		{Name: "d", Status: NotRun},
	}
	if !slices.Equal(got, want) {
		t.Errorf("MergeResults =\n%+v\nwant\n%+v", got, want)
	}
}
