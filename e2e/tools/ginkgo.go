package tools

// Ginkgo is Ginkgo's command line at the version Kubernetes' pin (../kube) requires, which runs the compiled
// e2e.test in parallel processes: e2e.test alone runs its specs one after another, and the External Storage
// suite's few hundred specs would take hours that way on this machine.
func Ginkgo() Module {
	return Module{
		Dir: "ginkgo", Name: "ginkgo", Requires: "github.com/onsi/ginkgo/v2",
		Binaries: map[string]string{"ginkgo": "github.com/onsi/ginkgo/v2/ginkgo"},
	}
}
