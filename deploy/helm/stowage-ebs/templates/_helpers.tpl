{{/* app.kubernetes.io/name of every object: upstream's chart name unless nameOverride. */}}
{{- define "stowage-ebs.name" -}}
{{ default "aws-ebs-csi-driver" .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end -}}

{{/* Labels of every object. */}}
{{- define "stowage-ebs.labels" -}}
app.kubernetes.io/name: {{ include "stowage-ebs.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: stowage
helm.sh/chart: {{ .Chart.Name }}-{{ .Chart.Version }}
{{- with .Values.customLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* A container's image: Stowage's, or upstream's when image.upstream. Takes the image values. */}}
{{- define "stowage.image" -}}
{{- if .upstream -}}
{{ .upstreamRepository }}:{{ .upstreamTag }}
{{- else -}}
{{- /* An empty tag is upstream's chart's "the release's": upstreamTag for upstream's repository. */ -}}
{{ .repository }}:{{ default (ternary .upstreamTag "latest" (eq (toString .repository) (toString .upstreamRepository))) .tag }}
{{- end -}}
{{- end -}}

{{/* --extra-tags' value from a map: key=value pairs in key order, comma separated. */}}
{{- define "stowage-ebs.tags" -}}
{{- $pairs := list -}}
{{- range $k, $val := . -}}
{{- $pairs = append $pairs (printf "%s=%v" $k $val) -}}
{{- end -}}
{{- join "," $pairs -}}
{{- end -}}

{{/* A container's --v: debugLogs raises every container to 7, as upstream. Takes dict "root" $ "level". */}}
{{- define "stowage-ebs.logLevel" -}}
{{- if .root.Values.debugLogs -}}7{{- else -}}{{ .level }}{{- end -}}
{{- end -}}

{{/* HTTP_PROXY, HTTPS_PROXY and NO_PROXY from proxy, when proxy.http_proxy is set. Takes $. */}}
{{- define "stowage-ebs.proxyEnv" -}}
{{- with .Values.proxy.http_proxy }}
- name: HTTP_PROXY
  value: {{ . | quote }}
- name: HTTPS_PROXY
  value: {{ . | quote }}
- name: NO_PROXY
  value: {{ default "" $.Values.proxy.no_proxy | quote }}
{{- end }}
{{- end -}}

{{/* ebs-plugin's env common to controller and node: FIPS mode (the Go module and the SDK's endpoints) and the
proxy. Takes $. */}}
{{- define "stowage-ebs.pluginEnv" -}}
{{- if .Values.fips }}
- name: GODEBUG
  value: fips140=on
- name: AWS_USE_FIPS_ENDPOINT
  value: "true"
{{- end }}
{{- include "stowage-ebs.proxyEnv" . }}
{{- end -}}

{{/*
RBAC from a copy of a deploy/rbac file in files/rbac (kept equal to its source by deploy/deploycheck), with
its ServiceAccounts left out (the chart creates them from values), kube-system replaced by the release's
namespace (or the one .namespaces gives its new name), and each ServiceAccount subject renamed through .subjects
(old name -> new name). Takes dict "root" $ "file" path "subjects" dict, optional "namespaces" dict.
*/}}
{{- define "stowage.rbac" -}}
{{- $root := .root -}}
{{- $subjects := .subjects -}}
{{- $namespaces := .namespaces | default dict -}}
{{- range $doc := regexSplit "(?m)^---$" ($root.Files.Get .file) -1 }}
{{- $o := fromYaml $doc }}
{{- if and $o.kind (ne $o.kind "ServiceAccount") }}
{{- if eq (dig "metadata" "namespace" "" $o) "kube-system" }}
{{- $_ := set $o.metadata "namespace" $root.Release.Namespace }}
{{- end }}
{{- if $o.subjects }}
{{- $new := list }}
{{- range $s := $o.subjects }}
{{- if eq $s.kind "ServiceAccount" }}
{{- $name := get $subjects $s.name | default $s.name }}
{{- $new = append $new (dict "kind" "ServiceAccount" "name" $name "namespace" (get $namespaces $name | default $root.Release.Namespace)) }}
{{- else }}
{{- $new = append $new $s }}
{{- end }}
{{- end }}
{{- $_ := set $o "subjects" $new }}
{{- end }}
---
{{ toYaml $o }}
{{- end }}
{{- end }}
{{- end -}}

{{/*
A controller sidecar on the plugin's socket: its own args (upstream's manifest's), then --http-endpoint when
metrics are on, then additionalArgs. Takes dict "root" $ "s" its values "name" container name "args" list
"env" list.
*/}}
{{- define "stowage-ebs.sidecar" -}}
{{- $root := .root -}}
{{- $s := .s -}}
- name: {{ .name }}
  image: {{ include "stowage.image" $s.image }}
  imagePullPolicy: {{ default $root.Values.image.pullPolicy $s.image.pullPolicy }}
  args:
    {{- range .args }}
    - {{ . }}
    {{- end }}
    {{- if $root.Values.controller.enableMetrics }}
    - --http-endpoint=0.0.0.0:{{ $s.metricsPort }}
    {{- end }}
    {{- range $s.additionalArgs }}
    - {{ . }}
    {{- end }}
  env:
    - name: ADDRESS
      value: /var/lib/csi/sockets/pluginproxy/csi.sock
    {{- with .env }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
    {{- include "stowage-ebs.proxyEnv" $root | nindent 4 }}
    {{- with $s.env }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- with $root.Values.controller.envFrom }}
  envFrom:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- if $root.Values.controller.enableMetrics }}
  ports:
    - name: {{ .port }}
      containerPort: {{ $s.metricsPort }}
      protocol: TCP
  {{- end }}
  volumeMounts:
    - name: socket-dir
      mountPath: /var/lib/csi/sockets/pluginproxy/
  resources:
    {{- toYaml (default $root.Values.controller.resources $s.resources) | nindent 4 }}
  {{- with $s.securityContext }}
  securityContext:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end -}}

{{/* A ClusterRole of a sidecar's additionalClusterRoleRules, bound to the controller's ServiceAccount. Takes
dict "root" $ "name" the sidecar's container name "rules" list. */}}
{{- define "stowage-ebs.extraRules" -}}
{{- with .rules }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: stowage-ebs-{{ $.name }}-additional
  labels:
    {{- include "stowage-ebs.labels" $.root | nindent 4 }}
rules:
  {{- toYaml . | nindent 2 }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: stowage-ebs-{{ $.name }}-additional
  labels:
    {{- include "stowage-ebs.labels" $.root | nindent 4 }}
subjects:
  - kind: ServiceAccount
    name: {{ $.root.Values.controller.serviceAccount.name }}
    namespace: {{ $.root.Release.Namespace }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: stowage-ebs-{{ $.name }}-additional
{{- end }}
{{- end -}}

{{/*
A controller sidecar's --kube-api-qps and --kube-api-burst, as a JSON list, from its kubeAPIQPS and kubeAPIBurst
values. Unset, Stowage's sidecar gets neither and runs without a client-side limit, at the pace the API
server's Priority and Fairness allows; upstream's image gets its manifests' 20 and 100, because its binaries
fall back to client-go's 5 and 10. An --kube-api-qps in additionalArgs comes later and wins, as upstream's
chart users set it. Takes the sidecar's values.
*/}}
{{- define "stowage-ebs.rateArgs" -}}
{{- $qps := toString (default "" .kubeAPIQPS) -}}
{{- $burst := toString (default "" .kubeAPIBurst) -}}
{{- if .image.upstream -}}
{{- $qps = default "20" $qps -}}
{{- $burst = default "100" $burst -}}
{{- end -}}
{{- $args := list -}}
{{- if $qps -}}{{- $args = append $args (printf "--kube-api-qps=%s" $qps) -}}{{- end -}}
{{- if $burst -}}{{- $args = append $args (printf "--kube-api-burst=%s" $burst) -}}{{- end -}}
{{- toJson $args -}}
{{- end -}}
