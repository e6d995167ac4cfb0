package testutil

import (
	"fmt"

	k8stesting "k8s.io/client-go/testing"
)

// Recorder is any fake clientset: each records its requests (kubernetes' and the snapshot client's alike).
type Recorder interface {
	Actions() []k8stesting.Action
}

// Actions lists a fake clientset's requests as "verb resource[/subresource] name", the form the controllers'
// table tests compare with the requests they expect.
func Actions(client Recorder) []string {
	var out []string
	for _, a := range client.Actions() {
		res := a.GetResource().Resource
		if a.GetSubresource() != "" {
			res += "/" + a.GetSubresource()
		}
		// Every action on one named object (get, patch, delete) is a GetAction: it has GetName.
		name := ""
		if a, ok := a.(k8stesting.GetAction); ok {
			name = a.GetName()
		}
		out = append(out, fmt.Sprintf("%s %s %s", a.GetVerb(), res, name))
	}
	return out
}
