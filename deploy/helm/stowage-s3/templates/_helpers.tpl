{{/* Labels of every object. */}}
{{- define "stowage-s3.labels" -}}
app.kubernetes.io/name: aws-mountpoint-s3-csi-driver
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
{{ .repository }}:{{ .tag }}
{{- end -}}
{{- end -}}

{{/*
RBAC from a copy of a deploy/rbac file in files/rbac (kept equal to its source by e2e/deploycheck), with
its ServiceAccounts left out (the chart creates them from values), kube-system replaced by the release's
namespace, and each ServiceAccount subject renamed through .subjects (old name -> new name).
Takes dict "root" $ "file" path "subjects" dict.
*/}}
{{- define "stowage.rbac" -}}
{{- $root := .root -}}
{{- $subjects := .subjects -}}
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

