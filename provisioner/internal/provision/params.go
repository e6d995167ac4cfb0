package provision

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// paramPrefix marks StorageClass parameters that belong to the provisioner, not the driver.
const paramPrefix = "csi.storage.k8s.io/"

// fsTypeKey and deprecatedFSTypeKey select the PV's fsType; the deprecated key, matched in any case, is also
// passed to the driver.
const (
	fsTypeKey           = paramPrefix + "fstype"
	deprecatedFSTypeKey = "fstype"
)

// Keys CreateVolume gets with --extra-create-metadata.
const (
	metaPVCName      = paramPrefix + "pvc/name"
	metaPVCNamespace = paramPrefix + "pvc/namespace"
	metaPVName       = paramPrefix + "pv/name"
)

// secretKind is one of the secrets a StorageClass can name for the driver's calls.
type secretKind int

const (
	secretProvisioner secretKind = iota
	secretControllerPublish
	secretNodeStage
	secretNodePublish
	secretControllerExpand
	secretNodeExpand
	secretControllerModify
	secretKinds
)

// secretKeys are the parameter keys naming one secret; the deprecated ones predate the prefix and are
// passed to the driver unchanged, as upstream does.
type secretKeys struct {
	name, namespace                     string
	deprecatedName, deprecatedNamespace string
}

var secretKeyTable = [secretKinds]secretKeys{
	secretProvisioner:       {paramPrefix + "provisioner-secret-name", paramPrefix + "provisioner-secret-namespace", "csiProvisionerSecretName", "csiProvisionerSecretNamespace"},
	secretControllerPublish: {paramPrefix + "controller-publish-secret-name", paramPrefix + "controller-publish-secret-namespace", "csiControllerPublishSecretName", "csiControllerPublishSecretNamespace"},
	secretNodeStage:         {paramPrefix + "node-stage-secret-name", paramPrefix + "node-stage-secret-namespace", "csiNodeStageSecretName", "csiNodeStageSecretNamespace"},
	secretNodePublish:       {paramPrefix + "node-publish-secret-name", paramPrefix + "node-publish-secret-namespace", "csiNodePublishSecretName", "csiNodePublishSecretNamespace"},
	secretControllerExpand:  {paramPrefix + "controller-expand-secret-name", paramPrefix + "controller-expand-secret-namespace", "", ""},
	secretNodeExpand:        {paramPrefix + "node-expand-secret-name", paramPrefix + "node-expand-secret-namespace", "", ""},
	secretControllerModify:  {paramPrefix + "controller-modify-secret-name", paramPrefix + "controller-modify-secret-namespace", "", ""},
}

// The default secret for every kind that names none of its own.
const (
	defaultSecretNameKey      = paramPrefix + "secret-name"
	defaultSecretNamespaceKey = paramPrefix + "secret-namespace"
)

// secretTemplate is a secret reference as written in the StorageClass, before ${...} substitution.
// nameKey and namespaceKey are the parameters it came from, for error messages.
type secretTemplate struct {
	name, namespace       string
	nameKey, namespaceKey string
}

// classParams is a StorageClass's parameters split into what the driver gets and what the provisioner uses.
type classParams struct {
	driver  map[string]string
	fsType  string
	secrets [secretKinds]*secretTemplate
}

// ParamError is a StorageClass parameter problem; Key names the parameter so the Event can say which.
type ParamError struct {
	Key string
	Msg string
}

func (e *ParamError) Error() string {
	return fmt.Sprintf("StorageClass parameter %q: %s", e.Key, e.Msg)
}

// parseClassParams validates params: every csi.storage.k8s.io/ key must be one the provisioner knows (an unknown
// one is a typo that would otherwise reach the driver silently) and secret names come in name+namespace pairs.
func parseClassParams(params map[string]string) (*classParams, error) {
	known := map[string]bool{fsTypeKey: true, defaultSecretNameKey: true, defaultSecretNamespaceKey: true}
	for _, k := range secretKeyTable {
		known[k.name], known[k.namespace] = true, true
	}
	out := &classParams{driver: map[string]string{}}
	// Sorted, so the error for a class with several bad keys is stable.
	keys := make([]string, 0, len(params))
	for k := range params {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if strings.HasPrefix(k, paramPrefix) {
			if !known[k] {
				return nil, &ParamError{Key: k, Msg: "unknown parameter with the reserved prefix " + paramPrefix}
			}
			continue
		}
		out.driver[k] = params[k]
	}

	// As upstream: the prefixed key matches exactly (any other spelling is an unknown prefixed key, refused
	// above), the deprecated one in any case ("fsType" is common in old classes), and only one may be set.
	var fsKeys []string
	for _, k := range keys {
		if k == fsTypeKey || strings.ToLower(k) == deprecatedFSTypeKey {
			fsKeys = append(fsKeys, k)
			out.fsType = params[k]
		}
	}
	if len(fsKeys) > 1 {
		// Name a deprecated key: that is the one to remove.
		i := slices.IndexFunc(fsKeys, func(k string) bool { return k != fsTypeKey })
		others := slices.Delete(slices.Clone(fsKeys), i, i+1)
		return nil, &ParamError{Key: fsKeys[i], Msg: "set together with " + strings.Join(others, ", ") + "; use only " + fsTypeKey}
	}

	def, err := secretPair(params, defaultSecretNameKey, defaultSecretNamespaceKey)
	if err != nil {
		return nil, err
	}
	for kind, k := range secretKeyTable {
		ref, err := secretPair(params, k.name, k.namespace)
		if err != nil {
			return nil, err
		}
		if k.deprecatedName != "" {
			old, err := secretPair(params, k.deprecatedName, k.deprecatedNamespace)
			if err != nil {
				return nil, err
			}
			if ref != nil && old != nil {
				return nil, &ParamError{Key: k.deprecatedName, Msg: "set together with " + k.name + "; use only " + k.name}
			}
			if ref == nil {
				ref = old
			}
		}
		if ref == nil {
			ref = def
		}
		out.secrets[kind] = ref
	}
	return out, nil
}

// secretPair reads one name/namespace pair; nil when neither is set.
func secretPair(params map[string]string, nameKey, nsKey string) (*secretTemplate, error) {
	name, hasName := params[nameKey]
	ns, hasNS := params[nsKey]
	switch {
	case !hasName && !hasNS:
		return nil, nil
	case !hasName || name == "":
		return nil, &ParamError{Key: nameKey, Msg: "missing or empty, but " + nsKey + " is set"}
	case !hasNS || ns == "":
		return nil, &ParamError{Key: nsKey, Msg: "missing or empty, but " + nameKey + " is set"}
	}
	return &secretTemplate{name: name, namespace: ns, nameKey: nameKey, namespaceKey: nsKey}, nil
}
