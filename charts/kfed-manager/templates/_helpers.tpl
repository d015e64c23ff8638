{{/* Names and labels shared by every object of the chart. */}}

{{- define "kfed-manager.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "kfed-manager.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "kfed-manager.selectorLabels" -}}
app.kubernetes.io/name: {{ include "kfed-manager.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "kfed-manager.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "kfed-manager.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: kfed
app.kubernetes.io/component: manager
{{- end -}}

{{- define "kfed-manager.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "kfed-manager.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "kfed-manager.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- /* The Secret holding the visibility API's serving certificate: the user's, or the one the chart makes. */ -}}
{{- /* kfed-manager's own is another Secret (Opaque, rendered empty): switching modes must not change a Secret's type. */ -}}
{{- define "kfed-manager.visibilityCertSecret" -}}
{{- if include "kfed-manager.visibilityCertByManager" . -}}
{{- printf "%s-visibility-managed-cert" (include "kfed-manager.fullname" .) -}}
{{- else -}}
{{- .Values.visibility.certificate.secretName | default (printf "%s-visibility-cert" (include "kfed-manager.fullname" .)) -}}
{{- end -}}
{{- end -}}

{{- /* "true" when kfed-manager makes and keeps the visibility certificate itself (no Secret of the user's). */ -}}
{{- define "kfed-manager.visibilityCertByManager" -}}
{{- if and (eq (.Values.visibility.certificate.generatedBy | default "chart") "kfed-manager") (not .Values.visibility.certificate.secretName) -}}
true
{{- end -}}
{{- end -}}

{{/*
Kueue's managedJobsNamespaceSelector, as a namespaceSelector block: the one in managerConfig.controllerManagerConfigYaml,
else Kueue's default (every namespace but kube-system and the release's own).
*/}}
{{- define "kfed-manager.managedJobsNamespaceSelector" -}}
{{- $config := fromYaml (.Values.managerConfig.controllerManagerConfigYaml | default "") -}}
{{- $selector := dict "matchExpressions" (list (dict "key" "kubernetes.io/metadata.name" "operator" "NotIn" "values" (list "kube-system" .Release.Namespace))) -}}
{{- if hasKey $config "managedJobsNamespaceSelector" -}}
{{- $selector = get $config "managedJobsNamespaceSelector" | default dict -}}
{{- end -}}
namespaceSelector:
{{ toYaml $selector | indent 2 }}
{{ end -}}
