package kubeletsim

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Defaults of the container runtime settings in Config.
const (
	defaultMaxGracePeriod    = 30 * time.Second
	defaultRestartBackoff    = time.Second
	defaultMaxRestartBackoff = 10 * time.Second
	// killRetry is how often SIGKILL is sent again until a container is gone, covering a process that
	// was being started when the first one went out.
	killRetry = 100 * time.Millisecond
	// stopGrace is the SIGTERM grace of containers when the node stops.
	stopGrace = 2 * time.Second
)

// podRun is a Pod whose containers the node runs.
type podRun struct {
	uid        types.UID
	containers []*containerRun
	done       chan struct{} // closed once every container has ended for good
	stop       chan struct{} // closed when the Pod is to be killed
	stopOnce   sync.Once

	mu      sync.Mutex
	written string // the last status patch written, so an unchanged status is not written again
}

// runs are the node's run Pods, by namespace/name.
type runs struct {
	mu   sync.Mutex
	pods map[string]*podRun
}

func (r *runs) get(key string) *podRun {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.pods[key]
}

func (r *runs) forget(key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.pods, key)
}

func (r *runs) all() []*podRun {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]*podRun, 0, len(r.pods))
	for _, p := range r.pods {
		out = append(out, p)
	}
	return out
}

// startContainers starts the Pod's containers unless they run already; its volumes are set up.
func (n *Node) startContainers(pod *v1.Pod, key string) (*podRun, error) {
	n.runs.mu.Lock()
	defer n.runs.mu.Unlock()
	if r := n.runs.pods[key]; r != nil && r.uid == pod.UID {
		return r, nil
	}
	r := &podRun{uid: pod.UID, done: make(chan struct{}), stop: make(chan struct{})}
	for _, c := range pod.Spec.Containers {
		sb, err := n.sandboxFor(pod, c)
		if err != nil {
			return nil, err
		}
		logPath := n.containerLogPath(pod.UID, c.Name)
		if err := os.MkdirAll(filepath.Dir(logPath), 0o750); err != nil {
			return nil, err
		}
		r.containers = append(r.containers, &containerRun{
			name: c.Name, podUID: string(pod.UID), sandbox: sb, logPath: logPath, log: n.log.WithValues("pod", key),
			policy:  pod.Spec.RestartPolicy,
			backoff: backoff{initial: n.cfg.RestartBackoff, max: n.cfg.MaxRestartBackoff},
			changed: func() { n.queue.Add(key) },
			status: v1.ContainerStatus{Name: c.Name, Image: c.Image, ImageID: c.Image, Started: ptrTo(false),
				State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "ContainerCreating"}}},
		})
	}
	var wg sync.WaitGroup
	for _, c := range r.containers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.run(r.stop)
		}()
	}
	go func() {
		wg.Wait()
		close(r.done)
		n.queue.Add(key)
	}()
	n.runs.pods[key] = r
	return r, nil
}

// kill ends the Pod's containers as the kubelet does: SIGTERM, then SIGKILL once grace has passed. It
// returns at once; done is closed when they are gone.
func (r *podRun) kill(grace time.Duration) {
	r.stopOnce.Do(func() {
		close(r.stop)
		go func() {
			for _, c := range r.containers {
				c.signal(syscall.SIGTERM)
			}
			select {
			case <-r.done:
				return
			case <-time.After(grace):
			}
			for {
				for _, c := range r.containers {
					c.signal(syscall.SIGKILL)
				}
				select {
				case <-r.done:
					return
				case <-time.After(killRetry):
				}
			}
		}()
	})
}

// exited tells whether every container has ended for good.
func (r *podRun) exited() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// gracePeriod is how long the node waits for a deleted Pod's containers after SIGTERM: the deletion's
// grace period (else the Pod's), capped by Config.MaxGracePeriod so a test never waits ten minutes.
func (n *Node) gracePeriod(pod *v1.Pod) time.Duration {
	grace := n.cfg.MaxGracePeriod
	secs := pod.DeletionGracePeriodSeconds
	if secs == nil {
		secs = pod.Spec.TerminationGracePeriodSeconds
	}
	if secs != nil && time.Duration(*secs)*time.Second < grace {
		grace = time.Duration(max(*secs, 0)) * time.Second
	}
	return grace
}

// killContainers kills the Pod's containers, if the node runs any, and waits until they are gone.
func (n *Node) killContainers(key string, grace time.Duration) {
	r := n.runs.get(key)
	if r == nil {
		return
	}
	r.kill(grace)
	<-r.done
	n.runs.forget(key)
}

// containerLogPath is the file a container's output goes to, all its restarts appended. It lives outside
// the Pod's directory so it can be read after the Pod is gone, as /var/log/pods can.
func (n *Node) containerLogPath(podUID types.UID, container string) string {
	return filepath.Join(n.cfg.RootDir, "pod-logs", string(podUID), container+".log")
}

// ContainerLog returns what a container of a Pod on this node wrote to stdout and stderr so far.
func (n *Node) ContainerLog(podUID, container string) ([]byte, error) {
	b, err := os.ReadFile(n.containerLogPath(types.UID(podUID), container))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("no log of container %s of pod %s on node %s: %w", container, podUID, n.cfg.NodeName, err)
	}
	return b, err
}

// killAllContainers kills every container of the node, all at once, and waits until they are gone.
func (n *Node) killAllContainers() {
	all := n.runs.all()
	for _, r := range all {
		r.kill(min(stopGrace, n.cfg.MaxGracePeriod))
	}
	for _, r := range all {
		<-r.done
	}
}
