package deploycheck

import (
	"encoding/json"
	"fmt"
)

const (
	s3Controller = "Deployment/s3-csi-controller"
	s3Node       = "DaemonSet/s3-csi-node"
)

// s3ValueEffects is what every key of upstream's aws-mountpoint-s3-csi-driver values does in stowage-s3.
var s3ValueEffects = func() map[string]valueEffect {
	m := map[string]valueEffect{}
	plugin := container("s3-plugin")
	reg := container("node-driver-registrar")
	both := func(check func(target string) func(rendered, any) error) func(rendered, any) error {
		return all(check(s3Controller), check(s3Node))
	}

	m["isHelmRepo"] = valueEffect{inert: "upstream's guard against installing its chart from a Git branch; Stowage's is installed from its repository"}
	m["isOpenShift"] = valueEffect{fails: true}
	m["image.repository"] = valueEffect{check: imageIs(s3Node, "s3-plugin", "repo")}
	m["image.tag"] = valueEffect{check: imageIs(s3Node, "s3-plugin", "tag")}
	m["image.pullPolicy"] = valueEffect{check: at(s3Node, plugin+".imagePullPolicy")}

	n := "node."
	m[n+"kubeletPath"] = valueEffect{check: func(r rendered, val any) error {
		p := fmt.Sprint(val)
		return all(at(s3Node, podSpec+".volumes[name=kubelet-dir].hostPath.path"), at(s3Node, plugin+".volumeMounts[name=kubelet-dir].mountPath"),
			env(s3Node, "s3-plugin", "CONTAINER_KUBELET_PATH"),
			fixed(p+"/plugins/s3.csi.aws.com/", at(s3Node, podSpec+".volumes[name=plugin-dir].hostPath.path")),
			fixed(p+"/plugins_registry/", at(s3Node, podSpec+".volumes[name=registration-dir].hostPath.path")),
			env(s3Node, "node-driver-registrar", "DRIVER_REG_SOCK_PATH", p+"/plugins/s3.csi.aws.com/csi.sock"))(r, val)
	}}
	m[n+"logLevel"] = valueEffect{check: arg(s3Node, "s3-plugin", "--v=%v")}
	for _, f := range []string{"user", "type", "role", "level"} {
		m[n+"seLinuxOptions."+f] = valueEffect{check: at(s3Node, plugin+".securityContext.seLinuxOptions."+f)}
	}
	m[n+"serviceAccount.create"] = valueEffect{alone: true, check: absent("ServiceAccount/s3-csi-driver-sa")}
	m[n+"serviceAccount.name"] = valueEffect{check: all(at(s3Node, podSpec+".serviceAccountName"), exists("ServiceAccount/my-s3-node-sa", "metadata"))}
	m[n+"podLabels"] = valueEffect{check: holdsMap(s3Node, "spec.template.metadata.labels")}
	m[n+"nodeSelector"] = valueEffect{check: holdsMap(s3Node, podSpec+".nodeSelector")}
	for _, f := range []string{"requests.cpu", "requests.memory", "limits.memory"} {
		m[n+"resources."+f] = valueEffect{check: at(s3Node, plugin+".resources."+f)}
	}
	m[n+"tolerateAllTaints"] = valueEffect{check: lacks(s3Node, podSpec+".tolerations", map[string]any{"operator": "Exists"})}
	m[n+"defaultTolerations"] = valueEffect{check: lacks(s3Node, podSpec+".tolerations",
		map[string]any{"key": "s3.csi.aws.com/agent-not-ready", "operator": "Exists"})}
	m[n+"tolerations"] = valueEffect{check: holds(s3Node, podSpec+".tolerations")}
	m[n+"affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"] = valueEffect{
		check: at(s3Node, podSpec+".affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms")}

	for _, s := range []struct{ key, name string }{{"nodeDriverRegistrar", "node-driver-registrar"}, {"livenessProbe", "liveness-probe"}} {
		p := "sidecars." + s.key + "."
		m[p+"image.repository"] = valueEffect{check: imageIs(s3Node, s.name, "repo")}
		m[p+"image.tag"] = valueEffect{check: imageIs(s3Node, s.name, "tag")}
		m[p+"image.pullPolicy"] = valueEffect{check: at(s3Node, container(s.name)+".imagePullPolicy")}
		m[p+"volumeMounts"] = valueEffect{check: at(s3Node, container(s.name)+".volumeMounts")}
		m[p+"resources"] = valueEffect{check: at(s3Node, container(s.name)+".resources")}
	}
	m["sidecars.nodeDriverRegistrar.env"] = valueEffect{check: holds(s3Node, reg+".env")}

	m["controller.podLabels"] = valueEffect{check: holdsMap(s3Controller, "spec.template.metadata.labels")}
	m["controller.serviceAccount.create"] = valueEffect{alone: true, check: absent("ServiceAccount/s3-csi-driver-controller-sa")}
	m["controller.serviceAccount.name"] = valueEffect{check: all(at(s3Controller, podSpec+".serviceAccountName"),
		exists("ServiceAccount/my-s3-controller-sa", "metadata"))}

	mp := "mountpointPod."
	m[mp+"namespace"] = valueEffect{check: all(env(s3Controller, "s3-csi-controller", "MOUNTPOINT_NAMESPACE"), env(s3Node, "s3-plugin", "MOUNTPOINT_NAMESPACE"),
		at("Role/stowage-s3-csi-node", "metadata.namespace"), at("RoleBinding/stowage-s3-csi-node", "metadata.namespace"),
		at("Role/s3-csi-driver-controller-role", "metadata.namespace"), absent("Namespace/mount-s3"))}
	m[mp+"createNamespace"] = valueEffect{alone: true, check: absent("Namespace/mount-s3")}
	m[mp+"priorityClassName"] = valueEffect{check: all(env(s3Controller, "s3-csi-controller", "MOUNTPOINT_PRIORITY_CLASS_NAME"),
		func(r rendered, val any) error { return exists("PriorityClass/"+fmt.Sprint(val), "value")(r, val) })}
	headroom := "read only with experimental.reserveHeadroomForMountpointPods, which fails"
	m[mp+"preemptingPriorityClassName"] = valueEffect{inert: headroom}
	m[mp+"headroomPriorityClassName"] = valueEffect{inert: headroom}
	m[mp+"podLabels"] = valueEffect{check: func(r rendered, val any) error {
		data, err := json.Marshal(normal(val))
		if err != nil {
			return err
		}
		return env(s3Controller, "s3-csi-controller", "MOUNTPOINT_POD_LABELS", string(data))(r, val)
	}}

	m["nameOverride"] = valueEffect{check: both(func(t string) func(rendered, any) error { return entry(t, "metadata.labels", "app.kubernetes.io/name") })}
	m["fullnameOverride"] = valueEffect{inert: "object names are fixed, as in upstream's chart"}
	m["customLabels"] = valueEffect{check: both(func(t string) func(rendered, any) error { return holdsMap(t, "metadata.labels") })}
	m["imagePullSecrets"] = valueEffect{check: both(func(t string) func(rendered, any) error { return at(t, podSpec+".imagePullSecrets") })}
	m["awsAccessSecret.name"] = valueEffect{check: at(s3Node, plugin+".env[name=AWS_ACCESS_KEY_ID].valueFrom.secretKeyRef.name")}
	m["awsAccessSecret.keyId"] = valueEffect{check: at(s3Node, plugin+".env[name=AWS_ACCESS_KEY_ID].valueFrom.secretKeyRef.key")}
	m["awsAccessSecret.accessKey"] = valueEffect{check: at(s3Node, plugin+".env[name=AWS_SECRET_ACCESS_KEY].valueFrom.secretKeyRef.key")}
	m["awsAccessSecret.sessionToken"] = valueEffect{check: at(s3Node, plugin+".env[name=AWS_SESSION_TOKEN].valueFrom.secretKeyRef.key")}
	m["eksPodIdentityAgent.containerCredentialsFullURI"] = valueEffect{check: env(s3Node, "s3-plugin", "EKS_POD_IDENTITY_AGENT_CONTAINER_CREDENTIALS_FULL_URI")}
	m["supportLegacySystemDMounts"] = valueEffect{check: env(s3Node, "s3-plugin", "SUPPORT_LEGACY_SYSTEMD_MOUNTS")}

	m["experimental.reserveHeadroomForMountpointPods"] = valueEffect{fails: true}
	m["experimental.headroomPodImage"] = valueEffect{inert: headroom}
	m["experimental.headroomPodLabels"] = valueEffect{inert: headroom}
	return m
}()
