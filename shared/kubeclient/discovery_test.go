package kubeclient

import (
	"errors"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/kubernetes/fake"
)

// failingDiscovery answers every discovery call with an error other than "not found".
type failingDiscovery struct{}

func (failingDiscovery) ServerResourcesForGroupVersion(string) (*metav1.APIResourceList, error) {
	return nil, errors.New("connection refused")
}

// Features are turned on only where the API server serves the resource; discovery failures other than "not
// served" are errors, not a silent "off".
func TestHasResource(t *testing.T) {
	client := fake.NewClientset()
	disco := client.Discovery().(*fakediscovery.FakeDiscovery)
	if served, err := HasResource(disco, "storage.k8s.io/v1", "volumeattributesclasses"); err != nil || served {
		t.Errorf("nothing served: %v, %v; want false, nil", served, err)
	}
	disco.Resources = []*metav1.APIResourceList{{GroupVersion: "storage.k8s.io/v1", APIResources: []metav1.APIResource{{Name: "storageclasses"}}}}
	if served, err := HasResource(disco, "storage.k8s.io/v1", "volumeattributesclasses"); err != nil || served {
		t.Errorf("group without the resource: %v, %v; want false, nil", served, err)
	}
	disco.Resources[0].APIResources = append(disco.Resources[0].APIResources, metav1.APIResource{Name: "volumeattributesclasses"})
	if served, err := HasResource(disco, "storage.k8s.io/v1", "volumeattributesclasses"); err != nil || !served {
		t.Errorf("served: %v, %v; want true, nil", served, err)
	}
	if served, err := HasResource(failingDiscovery{}, "storage.k8s.io/v1", "volumeattributesclasses"); err == nil || served {
		t.Errorf("discovery failing: %v, %v; want false and an error", served, err)
	}
}
