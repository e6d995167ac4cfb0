{{/* app.kubernetes.io/name of every object: upstream's chart name unless nameOverride. */}}
{{- define "stowage-s3.name" -}}
{{ default "aws-mountpoint-s3-csi-driver" .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end -}}

{{/* Labels of every object. */}}
{{- define "stowage-s3.labels" -}}
app.kubernetes.io/name: {{ include "stowage-s3.name" . }}
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

{{/*
RBAC from a copy of a deploy/rbac file in files/rbac (kept equal to its source by deploy/deploycheck), with
its ServiceAccounts left out (the chart creates them from values), kube-system replaced by the release's
namespace, each ServiceAccount subject renamed through .subjects (old name -> new name), and each role and
binding renamed through .names (old name -> new name; a role's references follow), so a copy shared with
another chart gets names of its own; the mount-s3 namespace (its Namespace object and what is in it) becomes
mountpointPod.namespace, and its Namespace object is left out unless mountpointPod.createNamespace. Takes dict
"root" $ "file" path "subjects" dict, optional "names" dict.
*/}}
{{- define "stowage.rbac" -}}
{{- $root := .root -}}
{{- $subjects := .subjects -}}
{{- $names := .names | default dict -}}
{{- range $doc := regexSplit "(?m)^---$" ($root.Files.Get .file) -1 }}
{{- $o := fromYaml $doc }}
{{- $mp := $root.Values.mountpointPod }}
{{- $isMPNamespace := and (eq $o.kind "Namespace") (eq (dig "metadata" "name" "" $o) "mount-s3") }}
{{- if $isMPNamespace }}
{{- $_ := set $o.metadata "name" $mp.namespace }}
{{- end }}
{{- if eq (dig "metadata" "namespace" "" $o) "mount-s3" }}
{{- $_ := set $o.metadata "namespace" $mp.namespace }}
{{- end }}
{{- if and $o.kind (ne $o.kind "ServiceAccount") (or (not $isMPNamespace) $mp.createNamespace) }}
{{- if hasKey $names $o.metadata.name }}
{{- $_ := set $o.metadata "name" (get $names $o.metadata.name) }}
{{- end }}
{{- if and $o.roleRef (hasKey $names $o.roleRef.name) }}
{{- $_ := set $o.roleRef "name" (get $names $o.roleRef.name) }}
{{- end }}
{{- if eq (dig "metadata" "namespace" "" $o) "kube-system" }}
{{- $_ := set $o.metadata "namespace" $root.Release.Namespace }}
{{- end }}
{{- if $o.subjects }}
{{- $new := list }}
{{- range $s := $o.subjects }}
{{- if eq $s.kind "ServiceAccount" }}
{{- $new = append $new (dict "kind" "ServiceAccount" "name" (get $subjects $s.name | default $s.name) "namespace" $root.Release.Namespace) }}
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

