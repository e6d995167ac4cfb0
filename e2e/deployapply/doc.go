// Package deployapply holds the end-to-end tests of what deploy/ installs: the kustomize compositions and the
// Helm charts, rendered by deploy/deploycheck's render command (a module of its own: Helm's library needs newer
// k8s.io modules than the workspace), are applied server-side to a real API server, and every Stowage binary
// is validated (STOWAGE_VALIDATE_ONLY) with exactly the args and env the manifests give its container.
package deployapply
