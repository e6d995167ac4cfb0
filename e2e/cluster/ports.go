package cluster

import (
	"fmt"
	"net"
)

// freePorts returns n distinct loopback TCP ports that were free a moment ago. etcd and kube-apiserver
// cannot listen on port 0 and report the port, so the ports are picked here and a start that loses the
// race to another process is retried with new ones (see startWithPortRetry).
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	// Hold every listener until all are picked, so the n ports differ from each other.
	var listeners []net.Listener
	defer func() {
		for _, l := range listeners {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("pick a free port: %w", err)
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
