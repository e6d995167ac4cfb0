{{/* A node DaemonSet: dict "root" $ "name" its name "key" its values' key with a dot "node" its values (node's, or merged for an additional one). */}}
{{- define "stowage-ebs.node" -}}
{{- $root := .root }}
{{- $v := .root.Values }}
{{- $n := .node }}
{{- $kubelet := trimSuffix "/" $n.kubeletPath }}
{{- if and (not (kindIs "invalid" $n.volumeAttachLimit)) (not (kindIs "invalid" $n.reservedVolumeAttachments)) }}
{{- fail (printf "%svolumeAttachLimit and %sreservedVolumeAttachments: set one at most, as upstream" .key .key) }}
{{- end }}
kind: DaemonSet
apiVersion: apps/v1
metadata:
  name: {{ .name }}
  namespace: {{ default $root.Release.Namespace $n.namespaceOverride }}
  labels:
    {{- include "stowage-ebs.labels" $root | nindent 4 }}
  {{- with $n.daemonSetAnnotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
spec:
  revisionHistoryLimit: {{ $n.revisionHistoryLimit }}
  selector:
    matchLabels:
      app: {{ .name }}
      app.kubernetes.io/name: {{ include "stowage-ebs.name" $root }}
      app.kubernetes.io/instance: {{ $root.Release.Name }}
  {{- with $n.updateStrategy }}
  updateStrategy:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  template:
    metadata:
      labels:
        app: {{ .name }}
        app.kubernetes.io/name: {{ include "stowage-ebs.name" $root }}
        app.kubernetes.io/instance: {{ $root.Release.Name }}
        {{- with $n.podLabels }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      {{- with $n.podAnnotations }}
      annotations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
    spec:
      nodeSelector:
        kubernetes.io/os: linux
        {{- with $n.nodeSelector }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      {{- with $n.affinity }}
      affinity:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      serviceAccountName: {{ $n.serviceAccount.name }}
      terminationGracePeriodSeconds: {{ $n.terminationGracePeriodSeconds }}
      priorityClassName: {{ default "system-node-critical" $n.priorityClassName }}
      hostNetwork: {{ $n.hostNetwork }}
      {{- with $n.dnsConfig }}
      dnsConfig:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      tolerations:
        {{- if $n.tolerateAllTaints }}
        - operator: Exists
        {{- else }}
        # Without these the node plugin never starts on a node that carries the startup taint, and the taint
        # (which keeps EBS workloads off the node until the driver is registered) is never removed.
        - key: ebs.csi.aws.com/agent-not-ready
          operator: Exists
        - key: CriticalAddonsOnly
          operator: Exists
        - operator: Exists
          effect: NoExecute
          tolerationSeconds: 300
        {{- end }}
        {{- with $n.tolerations }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      {{- with $v.imagePullSecrets }}
      imagePullSecrets:
        {{- range . }}
        {{- /* names, or objects with a name, as either chart's users write them */}}
        - name: {{ if kindIs "map" . }}{{ .name }}{{ else }}{{ . }}{{ end }}
        {{- end }}
      {{- end }}
      {{- with $n.securityContext }}
      securityContext:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $n.initContainers }}
      initContainers:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      containers:
        - name: ebs-plugin
          image: {{ include "stowage.image" $v.image }}
          imagePullPolicy: {{ $v.image.pullPolicy }}
          args:
            - node
            - --endpoint=$(CSI_ENDPOINT)
            {{- if $n.enableMetrics }}
            - --http-endpoint=0.0.0.0:3302
            {{- end }}
            - --csi-mount-point-prefix={{ $kubelet }}/plugins/kubernetes.io/csi/ebs.csi.aws.com/
            {{- with $n.metadataSources }}
            - --metadata-sources={{ . }}
            {{- end }}
            {{- if not (kindIs "invalid" $n.volumeAttachLimit) }}
            - --volume-attach-limit={{ $n.volumeAttachLimit }}
            {{- end }}
            {{- if not (kindIs "invalid" $n.reservedVolumeAttachments) }}
            - --reserved-volume-attachments={{ $n.reservedVolumeAttachments }}
            {{- end }}
            {{- if $n.legacyXFS }}
            - --legacy-xfs=true
            {{- end }}
            - --logging-format={{ $n.loggingFormat }}
            - --v={{ include "stowage-ebs.logLevel" (dict "root" $root "level" $n.logLevel) }}
            {{- range $n.additionalArgs }}
            - {{ . }}
            {{- end }}
          {{- with $n.envFrom }}
          envFrom:
            {{- toYaml . | nindent 12 }}
          {{- end }}
          env:
            - name: CSI_ENDPOINT
              value: unix:/csi/csi.sock
            - name: CSI_NODE_NAME
              valueFrom:
                fieldRef:
                  fieldPath: spec.nodeName
            {{- include "stowage-ebs.pluginEnv" $root | nindent 12 }}
            {{- with $n.env }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
          volumeMounts:
            - name: kubelet-dir
              mountPath: {{ $kubelet }}
              mountPropagation: Bidirectional
            - name: plugin-dir
              mountPath: /csi
            - name: device-dir
              mountPath: /dev
            {{- with $n.volumeMounts }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
          ports:
            - name: healthz
              containerPort: 9808
              protocol: TCP
            {{- if $n.enableMetrics }}
            - name: metrics
              containerPort: 3302
              protocol: TCP
            {{- end }}
          livenessProbe:
            httpGet:
              path: /healthz
              port: healthz
            initialDelaySeconds: 10
            timeoutSeconds: 3
            periodSeconds: 10
            failureThreshold: 5
          resources:
            {{- toYaml $n.resources | nindent 12 }}
          {{- with $n.containerSecurityContext }}
          securityContext:
            {{- toYaml . | nindent 12 }}
          {{- end }}
          lifecycle:
            preStop:
              exec:
                command: ["/bin/aws-ebs-csi-driver", "pre-stop-hook"]
        - name: node-driver-registrar
          image: {{ include "stowage.image" $v.sidecars.nodeDriverRegistrar.image }}
          imagePullPolicy: {{ default $v.image.pullPolicy $v.sidecars.nodeDriverRegistrar.image.pullPolicy }}
          args:
            - --csi-address=$(ADDRESS)
            - --kubelet-registration-path=$(DRIVER_REG_SOCK_PATH)
            - --http-endpoint=0.0.0.0:{{ $v.sidecars.nodeDriverRegistrar.healthPort }}
            - --v={{ include "stowage-ebs.logLevel" (dict "root" $root "level" $v.sidecars.nodeDriverRegistrar.logLevel) }}
            {{- range $v.sidecars.nodeDriverRegistrar.additionalArgs }}
            - {{ . }}
            {{- end }}
          env:
            - name: ADDRESS
              value: /csi/csi.sock
            - name: DRIVER_REG_SOCK_PATH
              value: {{ $kubelet }}/plugins/ebs.csi.aws.com/csi.sock
            {{- with $v.sidecars.nodeDriverRegistrar.env }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
          {{- with $n.envFrom }}
          envFrom:
            {{- toYaml . | nindent 12 }}
          {{- end }}
          ports:
            - name: healthz-ndr
              containerPort: {{ $v.sidecars.nodeDriverRegistrar.healthPort }}
              protocol: TCP
          {{- with $v.sidecars.nodeDriverRegistrar.livenessProbe }}
          livenessProbe:
            {{- toYaml . | nindent 12 }}
          {{- end }}
          volumeMounts:
            - name: plugin-dir
              mountPath: /csi
            - name: registration-dir
              mountPath: /registration
          resources:
            {{- toYaml (default $n.resources $v.sidecars.nodeDriverRegistrar.resources) | nindent 12 }}
          {{- with $v.sidecars.nodeDriverRegistrar.securityContext }}
          securityContext:
            {{- toYaml . | nindent 12 }}
          {{- end }}
        - name: liveness-probe
          image: {{ include "stowage.image" $v.sidecars.livenessProbe.image }}
          imagePullPolicy: {{ default $v.image.pullPolicy $v.sidecars.livenessProbe.image.pullPolicy }}
          args:
            - --csi-address=/csi/csi.sock
            {{- range $v.sidecars.livenessProbe.additionalArgs }}
            - {{ . }}
            {{- end }}
          volumeMounts:
            - name: plugin-dir
              mountPath: /csi
          resources:
            {{- toYaml (default $n.resources $v.sidecars.livenessProbe.resources) | nindent 12 }}
          {{- with $v.sidecars.livenessProbe.securityContext }}
          securityContext:
            {{- toYaml . | nindent 12 }}
          {{- end }}
      volumes:
        - name: kubelet-dir
          hostPath:
            path: {{ $kubelet }}
            type: Directory
        - name: plugin-dir
          hostPath:
            path: {{ $kubelet }}/plugins/ebs.csi.aws.com/
            type: DirectoryOrCreate
        - name: registration-dir
          hostPath:
            path: {{ $kubelet }}/plugins_registry/
            type: Directory
        - name: device-dir
          hostPath:
            path: /dev
            type: Directory
        {{- with $n.volumes }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
{{- end -}}
