package deploycheck

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

const (
	ebsController = "Deployment/ebs-csi-controller"
	ebsNode       = "DaemonSet/ebs-csi-node"
)

// container is the path of a container of a workload's pod.
func container(name string) string { return podSpec + ".containers[name=" + name + "]" }

// lacks: the list at path does not hold item.
func lacks(target, path string, item any) func(rendered, any) error {
	return func(r rendered, _ any) error {
		got, err := r.get(target, path)
		if err != nil {
			return err
		}
		list, _ := normal(got).([]any)
		if slices.ContainsFunc(list, func(e any) bool { return equal(e, item) }) {
			return fmt.Errorf("%s %s holds %v", target, path, item)
		}
		return nil
	}
}

// exists: the value at path is there.
func exists(target, path string) func(rendered, any) error {
	return func(r rendered, _ any) error {
		_, err := r.get(target, path)
		return err
	}
}

// entry: the map at path has key with the key's value (for map keys holding dots, such as label names).
func entry(target, path, key string) func(rendered, any) error {
	return func(r rendered, val any) error {
		return holdsMap(target, path)(r, map[string]any{key: val})
	}
}

// noEntry: the map at path, if any, lacks key.
func noEntry(target, path, key string) func(rendered, any) error {
	return func(r rendered, _ any) error {
		got, err := r.get(target, path)
		if err != nil {
			return nil
		}
		if m, _ := got.(map[string]any); m != nil {
			if _, ok := m[key]; ok {
				return fmt.Errorf("%s %s has %s", target, path, key)
			}
		}
		return nil
	}
}

// fixed: the check runs with a value of its own rather than the key's.
func fixed(val any, check func(rendered, any) error) func(rendered, any) error {
	return func(r rendered, _ any) error { return check(r, val) }
}

// imageIs: a container's image has the key's value as its repository ("repo") or tag ("tag").
func imageIs(target, c, part string) func(rendered, any) error {
	return func(r rendered, val any) error {
		img, err := r.get(target, container(c)+".image")
		if err != nil {
			return err
		}
		repo, tag, _ := strings.Cut(fmt.Sprint(img), ":")
		got := map[string]string{"repo": repo, "tag": tag}[part]
		if got != fmt.Sprint(val) {
			return fmt.Errorf("%s container %s runs %s: %s is %q, want %v", target, c, img, part, got, val)
		}
		return nil
	}
}

// each: a check over every element of the key's value (a list of objects), given that element.
func each(check func(r rendered, elem map[string]any) error) func(rendered, any) error {
	return func(r rendered, val any) error {
		list, _ := normal(val).([]any)
		if len(list) == 0 {
			return fmt.Errorf("the fixture's value %v is not a non-empty list", val)
		}
		for _, e := range list {
			m, _ := e.(map[string]any)
			if err := check(r, m); err != nil {
				return err
			}
		}
		return nil
	}
}

// classFields: the class object (kind/name) carries each of the fields an entry of storageClasses or
// volumeSnapshotClasses sets, with the driver's name in field driverField.
func classFields(kind, driverField string) func(rendered, map[string]any) error {
	return func(r rendered, e map[string]any) error {
		target := kind + "/" + fmt.Sprint(e["name"])
		checks := []func(rendered, any) error{fixed("ebs.csi.aws.com", at(target, driverField))}
		for _, f := range slices.Sorted(maps.Keys(e)) {
			switch f {
			case "name":
			case "annotations", "labels":
				checks = append(checks, fixed(e[f], holdsMap(target, "metadata."+f)))
			default:
				checks = append(checks, fixed(e[f], at(target, f)))
			}
		}
		return all(checks...)(r, nil)
	}
}

// ebsSidecar adds the entries of a controller sidecar's values (sidecars.<key>) in container c.
func ebsSidecar(m map[string]valueEffect, key, c string) {
	p := "sidecars." + key + "."
	m[p+"env"] = valueEffect{check: holds(ebsController, container(c)+".env")}
	m[p+"image.pullPolicy"] = valueEffect{check: at(ebsController, container(c)+".imagePullPolicy")}
	m[p+"image.repository"] = valueEffect{check: imageIs(ebsController, c, "repo")}
	m[p+"image.tag"] = valueEffect{check: imageIs(ebsController, c, "tag")}
	m[p+"logLevel"] = valueEffect{check: arg(ebsController, c, "--v=%v")}
	m[p+"additionalArgs"] = valueEffect{check: holds(ebsController, container(c)+".args")}
	m[p+"additionalClusterRoleRules"] = valueEffect{check: all(
		holds("ClusterRole/stowage-ebs-"+c+"-additional", "rules"),
		fixed("my-controller-sa", at("ClusterRoleBinding/stowage-ebs-"+c+"-additional", "subjects[kind=ServiceAccount].name")))}
	m[p+"resources"] = valueEffect{check: at(ebsController, container(c)+".resources")}
	m[p+"leaderElection.enabled"] = valueEffect{check: arg(ebsController, c, "--leader-election=%v")}
	for _, f := range []string{"seccompProfile.type", "readOnlyRootFilesystem", "allowPrivilegeEscalation"} {
		m[p+"securityContext."+f] = valueEffect{check: at(ebsController, container(c)+".securityContext."+f)}
	}
}

// ebsValueEffects is what every key of upstream's aws-ebs-csi-driver values does in stowage-ebs.
var ebsValueEffects = func() map[string]valueEffect {
	m := map[string]valueEffect{}
	both := func(check func(target string) func(rendered, any) error) func(rendered, any) error {
		return all(check(ebsController), check(ebsNode))
	}
	plugin := container("ebs-plugin")

	m["image.repository"] = valueEffect{check: both(func(t string) func(rendered, any) error { return imageIs(t, "ebs-plugin", "repo") })}
	m["image.tag"] = valueEffect{check: both(func(t string) func(rendered, any) error { return imageIs(t, "ebs-plugin", "tag") })}
	m["image.pullPolicy"] = valueEffect{check: both(func(t string) func(rendered, any) error { return at(t, plugin+".imagePullPolicy") })}
	m["customLabels"] = valueEffect{check: both(func(t string) func(rendered, any) error { return holdsMap(t, "metadata.labels") })}
	m["fips"] = valueEffect{check: both(func(t string) func(rendered, any) error {
		return all(env(t, "ebs-plugin", "GODEBUG", "fips140=on"), env(t, "ebs-plugin", "AWS_USE_FIPS_ENDPOINT", "true"))
	})}

	ebsSidecar(m, "provisioner", "csi-provisioner")
	ebsSidecar(m, "attacher", "csi-attacher")
	ebsSidecar(m, "snapshotter", "csi-snapshotter")
	ebsSidecar(m, "resizer", "csi-resizer")
	for _, k := range []string{"leaderElection.enabled"} {
		delete(m, "sidecars.snapshotter."+k) // upstream's snapshotter values have no leaderElection
	}
	m["sidecars.snapshotter.forceEnable"] = valueEffect{check: exists(ebsController, container("csi-snapshotter"))}

	labeler := "read only with sidecars.metadataLabeler.enabled, which fails"
	m["sidecars.metadataLabeler.enabled"] = valueEffect{fails: true}
	for _, k := range []string{"logLevel", "additionalArgs", "resources", "securityContext.readOnlyRootFilesystem", "securityContext.allowPrivilegeEscalation"} {
		m["sidecars.metadataLabeler."+k] = valueEffect{inert: labeler}
	}
	modifier := "read only with controller.volumeModificationFeature.enabled, which fails"
	for _, k := range []string{"env", "image.pullPolicy", "image.repository", "image.tag", "leaderElection.enabled", "logLevel", "additionalArgs",
		"resources", "volumeMounts", "securityContext.seccompProfile.type", "securityContext.readOnlyRootFilesystem", "securityContext.allowPrivilegeEscalation"} {
		m["sidecars.volumemodifier."+k] = valueEffect{inert: modifier}
	}

	probe := func(check func(target string) func(rendered, any) error) func(rendered, any) error {
		return both(check)
	}
	m["sidecars.livenessProbe.image.pullPolicy"] = valueEffect{check: probe(func(t string) func(rendered, any) error {
		return at(t, container("liveness-probe")+".imagePullPolicy")
	})}
	m["sidecars.livenessProbe.image.repository"] = valueEffect{check: probe(func(t string) func(rendered, any) error { return imageIs(t, "liveness-probe", "repo") })}
	m["sidecars.livenessProbe.image.tag"] = valueEffect{check: probe(func(t string) func(rendered, any) error { return imageIs(t, "liveness-probe", "tag") })}
	m["sidecars.livenessProbe.additionalArgs"] = valueEffect{check: probe(func(t string) func(rendered, any) error {
		return holds(t, container("liveness-probe")+".args")
	})}
	m["sidecars.livenessProbe.resources"] = valueEffect{check: probe(func(t string) func(rendered, any) error {
		return at(t, container("liveness-probe")+".resources")
	})}
	for _, f := range []string{"readOnlyRootFilesystem", "allowPrivilegeEscalation"} {
		m["sidecars.livenessProbe.securityContext."+f] = valueEffect{check: probe(func(t string) func(rendered, any) error {
			return at(t, container("liveness-probe")+".securityContext."+f)
		})}
	}

	reg := container("node-driver-registrar")
	m["sidecars.nodeDriverRegistrar.env"] = valueEffect{check: holds(ebsNode, reg+".env")}
	m["sidecars.nodeDriverRegistrar.image.pullPolicy"] = valueEffect{check: at(ebsNode, reg+".imagePullPolicy")}
	m["sidecars.nodeDriverRegistrar.image.repository"] = valueEffect{check: imageIs(ebsNode, "node-driver-registrar", "repo")}
	m["sidecars.nodeDriverRegistrar.image.tag"] = valueEffect{check: imageIs(ebsNode, "node-driver-registrar", "tag")}
	m["sidecars.nodeDriverRegistrar.logLevel"] = valueEffect{check: arg(ebsNode, "node-driver-registrar", "--v=%v")}
	m["sidecars.nodeDriverRegistrar.healthPort"] = valueEffect{check: all(arg(ebsNode, "node-driver-registrar", "--http-endpoint=0.0.0.0:%v"),
		at(ebsNode, reg+".ports[name=healthz-ndr].containerPort"))}
	m["sidecars.nodeDriverRegistrar.additionalArgs"] = valueEffect{check: holds(ebsNode, reg+".args")}
	m["sidecars.nodeDriverRegistrar.resources"] = valueEffect{check: at(ebsNode, reg+".resources")}
	for _, f := range []string{"readOnlyRootFilesystem", "allowPrivilegeEscalation"} {
		m["sidecars.nodeDriverRegistrar.securityContext."+f] = valueEffect{check: at(ebsNode, reg+".securityContext."+f)}
	}
	for _, f := range []string{"httpGet.path", "httpGet.port", "initialDelaySeconds", "periodSeconds", "timeoutSeconds"} {
		m["sidecars.nodeDriverRegistrar.livenessProbe."+f] = valueEffect{check: at(ebsNode, reg+".livenessProbe."+f)}
	}

	withProxy := []func(rendered, any) error{}
	withNoProxy := []func(rendered, any) error{}
	for _, w := range [][2]string{{ebsController, "ebs-plugin"}, {ebsController, "csi-provisioner"}, {ebsController, "csi-attacher"}, {ebsNode, "ebs-plugin"}} {
		withProxy = append(withProxy, env(w[0], w[1], "HTTP_PROXY"), env(w[0], w[1], "HTTPS_PROXY"))
		withNoProxy = append(withNoProxy, env(w[0], w[1], "NO_PROXY"))
	}
	m["proxy.http_proxy"] = valueEffect{check: all(withProxy...)}
	m["proxy.no_proxy"] = valueEffect{check: all(withNoProxy...)}
	m["imagePullSecrets"] = valueEffect{check: fixed([]any{map[string]any{"name": "registry-credentials"}},
		both(func(t string) func(rendered, any) error { return at(t, podSpec+".imagePullSecrets") }))}
	m["nameOverride"] = valueEffect{check: both(func(t string) func(rendered, any) error { return entry(t, "metadata.labels", "app.kubernetes.io/name") })}
	m["fullnameOverride"] = valueEffect{inert: "object names are fixed, as in upstream's chart, which does not read it either"}
	m["awsAccessSecret.name"] = valueEffect{check: at(ebsController, plugin+".env[name=AWS_ACCESS_KEY_ID].valueFrom.secretKeyRef.name")}
	m["awsAccessSecret.keyId"] = valueEffect{check: at(ebsController, plugin+".env[name=AWS_ACCESS_KEY_ID].valueFrom.secretKeyRef.key")}
	m["awsAccessSecret.accessKey"] = valueEffect{check: at(ebsController, plugin+".env[name=AWS_SECRET_ACCESS_KEY].valueFrom.secretKeyRef.key")}

	c := "controller."
	m[c+"batching"] = valueEffect{check: arg(ebsController, "ebs-plugin", "--batching=%v")}
	m[c+"volumeModificationFeature.enabled"] = valueEffect{fails: true}
	m[c+"enableNodeLocalVolumes"] = valueEffect{fails: true}
	m[c+"additionalArgs"] = valueEffect{check: holds(ebsController, plugin+".args")}
	m[c+"sdkDebugLog"] = valueEffect{check: arg(ebsController, "ebs-plugin", "--aws-sdk-debug-log=%v")}
	m[c+"loggingFormat"] = valueEffect{check: arg(ebsController, "ebs-plugin", "--logging-format=%v")}
	m[c+"affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution"] = valueEffect{
		check: at(ebsController, podSpec+".affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution")}
	m[c+"affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution"] = valueEffect{
		check: at(ebsController, podSpec+".affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution")}
	m[c+"defaultFsType"] = valueEffect{check: arg(ebsController, "csi-provisioner", "--default-fstype=%v")}
	m[c+"env"] = valueEffect{check: holds(ebsController, plugin+".env")}
	m[c+"envFrom"] = valueEffect{check: all(at(ebsController, plugin+".envFrom"), at(ebsController, container("csi-provisioner")+".envFrom"),
		at(ebsController, container("liveness-probe")+".envFrom"))}
	m[c+"extraCreateMetadata"] = valueEffect{check: all(lacks(ebsController, container("csi-provisioner")+".args", "--extra-create-metadata"),
		lacks(ebsController, container("csi-resizer")+".args", "--extra-modify-metadata"))}
	m[c+"extraVolumeTags"] = valueEffect{check: func(r rendered, val any) error {
		tags, _ := normal(val).(map[string]any)
		var pairs []string
		for _, k := range slices.Sorted(maps.Keys(tags)) {
			pairs = append(pairs, fmt.Sprintf("%s=%v", k, tags[k]))
		}
		return arg(ebsController, "ebs-plugin", "--extra-tags=%s")(r, strings.Join(pairs, ","))
	}}
	m[c+"httpEndpoint"] = valueEffect{check: arg(ebsController, "ebs-plugin", "--http-endpoint=%v")}
	m[c+"enableMetrics"] = valueEffect{check: all(exists("Service/ebs-csi-controller", "spec.ports[name=metrics]"),
		fixed("0.0.0.0:3301", arg(ebsController, "ebs-plugin", "--http-endpoint=%v")))}
	m[c+"enablePrometheusAnnotations"] = valueEffect{check: noEntry("Service/ebs-csi-controller", "metadata.annotations", "prometheus.io/scrape")}
	m[c+"serviceMonitor.forceEnable"] = valueEffect{check: exists("ServiceMonitor/ebs-csi-controller", "spec.endpoints")}
	m[c+"serviceMonitor.labels"] = valueEffect{check: holdsMap("ServiceMonitor/ebs-csi-controller", "metadata.labels")}
	m[c+"serviceMonitor.interval"] = valueEffect{check: at("ServiceMonitor/ebs-csi-controller", "spec.endpoints[targetPort=3301].interval")}
	m[c+"k8sTagClusterId"] = valueEffect{check: arg(ebsController, "ebs-plugin", "--k8s-tag-cluster-id=%v")}
	m[c+"logLevel"] = valueEffect{check: arg(ebsController, "ebs-plugin", "--v=%v")}
	m[c+"userAgentExtra"] = valueEffect{check: arg(ebsController, "ebs-plugin", "--user-agent-extra=%v")}
	m[c+"nodeSelector"] = valueEffect{check: holdsMap(ebsController, podSpec+".nodeSelector")}
	m[c+"deploymentAnnotations"] = valueEffect{check: holdsMap(ebsController, "metadata.annotations")}
	m[c+"podAnnotations"] = valueEffect{check: holdsMap(ebsController, "spec.template.metadata.annotations")}
	m[c+"podLabels"] = valueEffect{check: holdsMap(ebsController, "spec.template.metadata.labels")}
	m[c+"podDisruptionBudget.enabled"] = valueEffect{alone: true, check: absent("PodDisruptionBudget/ebs-csi-controller")}
	m[c+"priorityClassName"] = valueEffect{check: at(ebsController, podSpec+".priorityClassName")}
	m[c+"region"] = valueEffect{check: env(ebsController, "ebs-plugin", "AWS_REGION")}
	m[c+"replicaCount"] = valueEffect{check: at(ebsController, "spec.replicas")}
	m[c+"revisionHistoryLimit"] = valueEffect{check: at(ebsController, "spec.revisionHistoryLimit")}
	m[c+"socketDirVolume.emptyDir"] = valueEffect{check: at(ebsController, podSpec+".volumes[name=socket-dir].emptyDir")}
	m[c+"updateStrategy.type"] = valueEffect{check: at(ebsController, "spec.strategy.type")}
	m[c+"updateStrategy.rollingUpdate.maxUnavailable"] = valueEffect{check: at(ebsController, "spec.strategy.rollingUpdate.maxUnavailable")}
	for _, f := range []string{"requests.cpu", "requests.memory", "limits.memory"} {
		m[c+"resources."+f] = valueEffect{check: at(ebsController, plugin+".resources."+f)}
	}
	m[c+"serviceAccount.create"] = valueEffect{alone: true, check: absent("ServiceAccount/ebs-csi-controller-sa")}
	m[c+"serviceAccount.name"] = valueEffect{check: all(at(ebsController, podSpec+".serviceAccountName"), exists("ServiceAccount/my-controller-sa", "metadata"))}
	m[c+"serviceAccount.annotations"] = valueEffect{check: holdsMap("ServiceAccount/my-controller-sa", "metadata.annotations")}
	m[c+"serviceAccount.automountServiceAccountToken"] = valueEffect{check: at("ServiceAccount/my-controller-sa", "automountServiceAccountToken")}
	m[c+"tolerations"] = valueEffect{check: at(ebsController, podSpec+".tolerations")}
	m[c+"topologySpreadConstraints"] = valueEffect{check: func(r rendered, val any) error {
		// Each constraint as given, with a labelSelector on the controller's pods added, as upstream.
		want, _ := normal(val).([]any)
		for i := range want {
			w := want[i].(map[string]any)
			w["labelSelector"] = map[string]any{"matchLabels": map[string]any{"app": "ebs-csi-controller",
				"app.kubernetes.io/instance": "stowage", "app.kubernetes.io/name": "my-ebs"}}
		}
		return at(ebsController, podSpec+".topologySpreadConstraints")(r, want)
	}}
	for _, f := range []string{"runAsNonRoot", "runAsUser", "runAsGroup", "fsGroup"} {
		m[c+"securityContext."+f] = valueEffect{check: at(ebsController, podSpec+".securityContext."+f)}
	}
	m[c+"volumes"] = valueEffect{check: holds(ebsController, podSpec+".volumes")}
	m[c+"volumeMounts"] = valueEffect{check: holds(ebsController, plugin+".volumeMounts")}
	for _, f := range []string{"seccompProfile.type", "readOnlyRootFilesystem", "allowPrivilegeEscalation"} {
		m[c+"containerSecurityContext."+f] = valueEffect{check: at(ebsController, plugin+".securityContext."+f)}
	}
	m[c+"initContainers"] = valueEffect{check: at(ebsController, podSpec+".initContainers")}
	m[c+"otelTracing"] = valueEffect{fails: true}
	m[c+"dnsConfig"] = valueEffect{check: at(ebsController, podSpec+".dnsConfig")}

	n := "node."
	m[n+"selinux"] = valueEffect{check: all(fixed(true, at("CSIDriver/ebs.csi.aws.com", "spec.seLinuxMount")),
		fixed("/sys/fs/selinux", at(ebsNode, podSpec+".volumes[name=selinux-sysfs].hostPath.path")),
		fixed("/etc/selinux/config", at(ebsNode, podSpec+".volumes[name=selinux-config].hostPath.path")),
		fixed("/sys/fs/selinux", at(ebsNode, plugin+".volumeMounts[name=selinux-sysfs].mountPath")),
		fixed("/etc/selinux/config", at(ebsNode, plugin+".volumeMounts[name=selinux-config].mountPath")))}
	m[n+"env"] = valueEffect{check: holds(ebsNode, plugin+".env")}
	m[n+"envFrom"] = valueEffect{check: all(at(ebsNode, plugin+".envFrom"), at(ebsNode, reg+".envFrom"))}
	m[n+"kubeletPath"] = valueEffect{check: func(r rendered, val any) error {
		return all(at(ebsNode, podSpec+".volumes[name=kubelet-dir].hostPath.path"), at(ebsNode, plugin+".volumeMounts[name=kubelet-dir].mountPath"),
			fixed(fmt.Sprint(val)+"/plugins/ebs.csi.aws.com/", at(ebsNode, podSpec+".volumes[name=plugin-dir].hostPath.path")),
			fixed(fmt.Sprint(val)+"/plugins_registry/", at(ebsNode, podSpec+".volumes[name=registration-dir].hostPath.path")),
			env(ebsNode, "node-driver-registrar", "DRIVER_REG_SOCK_PATH", fmt.Sprint(val)+"/plugins/ebs.csi.aws.com/csi.sock"))(r, val)
	}}
	m[n+"loggingFormat"] = valueEffect{check: arg(ebsNode, "ebs-plugin", "--logging-format=%v")}
	m[n+"logLevel"] = valueEffect{check: arg(ebsNode, "ebs-plugin", "--v=%v")}
	m[n+"enableMetrics"] = valueEffect{check: all(exists("Service/ebs-csi-node", "spec.ports[name=metrics]"),
		fixed("0.0.0.0:3302", arg(ebsNode, "ebs-plugin", "--http-endpoint=%v")))}
	m[n+"enablePrometheusAnnotations"] = valueEffect{check: noEntry("Service/ebs-csi-node", "metadata.annotations", "prometheus.io/scrape")}
	m[n+"serviceMonitor.forceEnable"] = valueEffect{check: exists("ServiceMonitor/ebs-csi-node", "spec.endpoints")}
	m[n+"serviceMonitor.labels"] = valueEffect{check: holdsMap("ServiceMonitor/ebs-csi-node", "metadata.labels")}
	m[n+"serviceMonitor.interval"] = valueEffect{check: at("ServiceMonitor/ebs-csi-node", "spec.endpoints[targetPort=3302].interval")}
	m[n+"priorityClassName"] = valueEffect{check: at(ebsNode, podSpec+".priorityClassName")}
	m[n+"additionalArgs"] = valueEffect{check: holds(ebsNode, plugin+".args")}
	m[n+"affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"] = valueEffect{
		check: at(ebsNode, podSpec+".affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms")}
	m[n+"nodeSelector"] = valueEffect{check: holdsMap(ebsNode, podSpec+".nodeSelector")}
	m[n+"daemonSetAnnotations"] = valueEffect{check: holdsMap(ebsNode, "metadata.annotations")}
	m[n+"podAnnotations"] = valueEffect{check: holdsMap(ebsNode, "spec.template.metadata.annotations")}
	m[n+"podLabels"] = valueEffect{check: holdsMap(ebsNode, "spec.template.metadata.labels")}
	m[n+"terminationGracePeriodSeconds"] = valueEffect{check: at(ebsNode, podSpec+".terminationGracePeriodSeconds")}
	m[n+"tolerateAllTaints"] = valueEffect{check: lacks(ebsNode, podSpec+".tolerations", map[string]any{"operator": "Exists"})}
	m[n+"tolerations"] = valueEffect{check: holds(ebsNode, podSpec+".tolerations")}
	for _, f := range []string{"requests.cpu", "requests.memory", "limits.memory"} {
		m[n+"resources."+f] = valueEffect{check: at(ebsNode, plugin+".resources."+f)}
	}
	m[n+"revisionHistoryLimit"] = valueEffect{check: at(ebsNode, "spec.revisionHistoryLimit")}
	m[n+"probeDirVolume.emptyDir"] = valueEffect{fails: true}
	m[n+"serviceAccount.create"] = valueEffect{alone: true, check: absent("ServiceAccount/ebs-csi-node-sa")}
	m[n+"serviceAccount.name"] = valueEffect{check: all(at(ebsNode, podSpec+".serviceAccountName"), exists("ServiceAccount/my-node-sa", "metadata"))}
	m[n+"serviceAccount.annotations"] = valueEffect{check: holdsMap("ServiceAccount/my-node-sa", "metadata.annotations")}
	m[n+"serviceAccount.automountServiceAccountToken"] = valueEffect{check: at("ServiceAccount/my-node-sa", "automountServiceAccountToken")}
	m[n+"serviceAccount.disableMutation"] = valueEffect{fails: true}
	m[n+"enableLinux"] = valueEffect{alone: true, check: absent(ebsNode)}
	m[n+"enableWindows"] = valueEffect{inert: "Stowage is Linux only: no Windows DaemonSet either way (NOTES.txt says so when it is true)"}
	m[n+"metadataSources"] = valueEffect{check: arg(ebsNode, "ebs-plugin", "--metadata-sources=%v")}
	m[n+"legacyXFS"] = valueEffect{check: arg(ebsNode, "ebs-plugin", "--legacy-xfs=%v")}
	m[n+"reservedVolumeAttachments"] = valueEffect{alone: true, check: arg(ebsNode, "ebs-plugin", "--reserved-volume-attachments=%v")}
	m[n+"volumeAttachLimit"] = valueEffect{check: arg(ebsNode, "ebs-plugin", "--volume-attach-limit=%v")}
	m[n+"updateStrategy.type"] = valueEffect{check: at(ebsNode, "spec.updateStrategy.type")}
	m[n+"updateStrategy.rollingUpdate.maxUnavailable"] = valueEffect{check: at(ebsNode, "spec.updateStrategy.rollingUpdate.maxUnavailable")}
	m[n+"hostNetwork"] = valueEffect{check: at(ebsNode, podSpec+".hostNetwork")}
	for _, f := range []string{"runAsNonRoot", "runAsUser", "runAsGroup", "fsGroup"} {
		m[n+"securityContext."+f] = valueEffect{check: at(ebsNode, podSpec+".securityContext."+f)}
	}
	m[n+"namespaceOverride"] = valueEffect{check: all(at(ebsNode, "metadata.namespace"), at("ServiceAccount/my-node-sa", "metadata.namespace"),
		at("ClusterRoleBinding/stowage-ebs-csi-node", "subjects[kind=ServiceAccount].namespace"))}
	m[n+"volumes"] = valueEffect{check: holds(ebsNode, podSpec+".volumes")}
	m[n+"volumeMounts"] = valueEffect{check: holds(ebsNode, plugin+".volumeMounts")}
	for _, f := range []string{"readOnlyRootFilesystem", "privileged"} {
		m[n+"containerSecurityContext."+f] = valueEffect{check: at(ebsNode, plugin+".securityContext."+f)}
	}
	m[n+"initContainers"] = valueEffect{check: at(ebsNode, podSpec+".initContainers")}
	m[n+"otelTracing"] = valueEffect{fails: true}
	m[n+"dnsConfig"] = valueEffect{check: at(ebsNode, podSpec+".dnsConfig")}

	m["additionalDaemonSets"] = valueEffect{check: func(r rendered, val any) error {
		sets, _ := normal(val).(map[string]any)
		if len(sets) == 0 {
			return fmt.Errorf("the fixture's value %v is not a non-empty map", val)
		}
		for name, v := range sets {
			target := "DaemonSet/ebs-csi-node-" + name
			checks := []func(rendered, any) error{fixed("my-node-sa", at(target, podSpec+".serviceAccountName"))}
			for k, x := range v.(map[string]any) {
				switch k {
				case "nodeSelector":
					checks = append(checks, fixed(x, holdsMap(target, podSpec+".nodeSelector")))
				case "volumeAttachLimit":
					checks = append(checks, fixed(x, arg(target, "ebs-plugin", "--volume-attach-limit=%v")))
				default:
					return fmt.Errorf("additionalDaemonSets.%s.%s: no check for it here", name, k)
				}
			}
			if err := all(checks...)(r, nil); err != nil {
				return err
			}
		}
		return nil
	}}
	m["storageClasses"] = valueEffect{check: each(classFields("StorageClass", "provisioner"))}
	m["defaultStorageClass.enabled"] = valueEffect{check: fixed("true",
		entry("StorageClass/ebs-csi-default-sc", "metadata.annotations", "storageclass.kubernetes.io/is-default-class"))}
	m["volumeSnapshotClasses"] = valueEffect{check: each(classFields("VolumeSnapshotClass", "driver"))}
	m["useOldCSIDriver"] = valueEffect{check: noEntry("CSIDriver/ebs.csi.aws.com", "spec", "fsGroupPolicy")}
	m["nodeAllocatableUpdatePeriodSeconds"] = valueEffect{check: at("CSIDriver/ebs.csi.aws.com", "spec.nodeAllocatableUpdatePeriodSeconds")}
	m["nodeComponentOnly"] = valueEffect{alone: true, check: all(absent(ebsController, "PodDisruptionBudget/ebs-csi-controller",
		"ServiceAccount/ebs-csi-controller-sa", "ClusterRoleBinding/stowage-csi-provisioner", "CSIDriver/ebs.csi.aws.com"), exists(ebsNode, "spec"))}
	m["debugLogs"] = valueEffect{alone: true, check: all(
		fixed(7, arg(ebsController, "ebs-plugin", "--v=%v")), fixed(7, arg(ebsNode, "ebs-plugin", "--v=%v")),
		fixed(7, arg(ebsController, "csi-provisioner", "--v=%v")), fixed(7, arg(ebsNode, "node-driver-registrar", "--v=%v")),
		fixed(true, arg(ebsController, "ebs-plugin", "--aws-sdk-debug-log=%v")))}
	tester := "Stowage's chart has no helm test pod (NOTES.txt says so when it is enabled)"
	m["helmTester.enabled"] = valueEffect{inert: tester}
	m["helmTester.image"] = valueEffect{inert: tester}
	return m
}()
