package kubeletsim

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
)

// containerRun is one container of a run Pod: its process, restarted per the Pod's restartPolicy, and the
// status the kubelet reports for it.
type containerRun struct {
	name    string
	podUID  string
	sandbox *sandbox
	logPath string
	log     klog.Logger
	policy  v1.RestartPolicy
	backoff backoff
	changed func() // called on every status change

	mu     sync.Mutex
	status v1.ContainerStatus
	proc   *os.Process
}

// backoff is the restart delay of a crashing container, doubling from initial up to max.
type backoff struct{ initial, max time.Duration }

// run starts the container and restarts it until it is done for good or stop is closed; it returns once
// its last process has exited.
func (c *containerRun) run(stop <-chan struct{}) {
	delay := c.backoff.initial
	for {
		select {
		case <-stop:
			return
		default:
		}
		exit := c.runOnce()
		select {
		case <-stop:
			return
		default:
		}
		if c.policy == v1.RestartPolicyNever || (c.policy == v1.RestartPolicyOnFailure && exit == 0) {
			return
		}
		c.update(func(s *v1.ContainerStatus) {
			s.LastTerminationState, s.State = s.State, v1.ContainerState{Waiting: &v1.ContainerStateWaiting{
				Reason: "CrashLoopBackOff", Message: fmt.Sprintf("back-off %s restarting failed container=%s", delay, c.name)}}
		})
		select {
		case <-stop:
			return
		case <-time.After(delay):
		}
		delay = min(2*delay, c.backoff.max)
		c.update(func(s *v1.ContainerStatus) { s.RestartCount++ })
	}
}

// runOnce runs one process of the container to its end and returns its exit code.
func (c *containerRun) runOnce() int32 {
	started := metav1.NewTime(time.Now().Truncate(time.Second))
	cmd, err := c.start()
	if err != nil {
		c.log.Error(err, "Container did not start", "container", c.name)
		c.terminated(started, 128, "StartError", err.Error())
		return 128
	}
	c.update(func(s *v1.ContainerStatus) {
		s.State = v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: started}}
		s.Ready, s.Started = true, ptrTo(true)
		s.ContainerID = fmt.Sprintf("kubeletsim://%s/%s-%d", c.podUID, s.Name, s.RestartCount)
	})
	c.log.V(2).Info("Container started", "container", c.name, "pid", cmd.Process.Pid, "restartCount", c.restarts())
	err = cmd.Wait()
	c.mu.Lock()
	c.proc = nil
	c.mu.Unlock()
	code, reason := int32(0), "Completed"
	var exitErr *exec.ExitError
	switch {
	case errors.As(err, &exitErr):
		reason = "Error"
		if ws, ok := exitErr.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			code = 128 + int32(ws.Signal())
		} else {
			code = int32(exitErr.ExitCode())
		}
	case err != nil:
		code, reason = 128, "Error"
	}
	c.terminated(started, code, reason, "")
	c.log.V(2).Info("Container exited", "container", c.name, "exitCode", code)
	return code
}

func (c *containerRun) start() (*exec.Cmd, error) {
	logFile, err := os.OpenFile(c.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
	if err != nil {
		return nil, err
	}
	defer logFile.Close() // the child has its own copy
	cmd, err := c.sandbox.command(logFile)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c.proc = cmd.Process
	return cmd, nil
}

func (c *containerRun) terminated(started metav1.Time, code int32, reason, message string) {
	c.update(func(s *v1.ContainerStatus) {
		s.State = v1.ContainerState{Terminated: &v1.ContainerStateTerminated{
			ExitCode: code, Reason: reason, Message: message, StartedAt: started,
			FinishedAt: metav1.NewTime(time.Now().Truncate(time.Second)), ContainerID: s.ContainerID,
		}}
		s.Ready, s.Started = false, ptrTo(false)
	})
}

// signal sends sig to the container's first process, if it runs. SIGKILL ends the whole container: the
// first process is its PID namespace's init.
func (c *containerRun) signal(sig syscall.Signal) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.proc != nil {
		_ = c.proc.Signal(sig)
	}
}

func (c *containerRun) update(fn func(*v1.ContainerStatus)) {
	c.mu.Lock()
	fn(&c.status)
	c.mu.Unlock()
	c.changed()
}

func (c *containerRun) restarts() int32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.status.RestartCount
}

// snapshot is the container's status now.
func (c *containerRun) snapshot() v1.ContainerStatus {
	c.mu.Lock()
	defer c.mu.Unlock()
	return *c.status.DeepCopy()
}
