// Package cluster runs a real Kubernetes control plane on this machine for end-to-end tests and the
// local demo: etcd, kube-apiserver and kube-controller-manager as child processes on free 127.0.0.1 ports.
//
// The binaries are built from Go modules by the nested tools modules e2e/tools/etcd and e2e/tools/kube
// (GOWORK=off; k8s.io/kubernetes with its staging modules replaced by their published releases) into
// <cache>/bin/<name>-<version>/, only when missing. <cache> is $STOWAGE_CACHE_DIR, else .cache at the
// repository root (the folder holding go.work). A cold build takes about 4 minutes per Kubernetes binary
// on 2 cores; an flock on the cache keeps concurrent test packages from building twice.
//
// The API server runs with RBAC (--authorization-mode=Node,RBAC), certificates from a fresh CA,
// service-account tokens (issuer and audience https://kubernetes.default.svc, TokenRequest) and every
// default controller in kube-controller-manager (PV binder, attach-detach, expander, service-account
// token, namespace, garbage collector...), each controller under its own ServiceAccount.
//
// The API:
//
//	c, err := cluster.Start(ctx, cluster.Options{}) // build if needed, start, wait until ready
//	defer c.Stop()                                   // kill every child, remove the temp dir
//	c.Client()                                       // admin clientset (system:masters)
//	c.RESTConfig()                                   // admin *rest.Config, a fresh copy each call
//	c.Kubeconfig()                                   // path of the admin kubeconfig
//	c.ServiceAccountKubeconfig(ctx, ns, name)        // kubeconfig path for a ServiceAccount (token)
//	c.Apply(ctx, "deploy/x/rbac.yaml")               // server-side apply of YAML manifests as admin
//	c.LogTail(50)                                    // tail of each component's log
//
// In tests, clustertest.Start(t) does Start and registers Stop (and, on failure, the log tails) with
// t.Cleanup. Start only in files behind the e2e build tag: unit tests must not build or run it.
//
// No orphans: every child runs in its own process group, which Stop ends with SIGTERM and, after a
// grace period, SIGKILL; every child also gets SIGKILL from the kernel if its parent dies (Pdeathsig).
// Child logs are files under <dir>/logs; a failed start returns the tail of the failing component's log.
package cluster
