package quadlets

// sectionKeys are the keys each quadlet section accepts, as Podman 5.7's
// generator knows them (podman-systemd.unit(5)). Keys of [Unit], [Service],
// [Install] and X- sections are systemd's and pass through unchecked.
var sectionKeys = map[string]map[string]bool{
	"Container": keySet("AddCapability", "AddDevice", "AddHost", "Annotation", "AutoUpdate", "CgroupsMode", "ContainerName", "ContainersConfModule", "DNS", "DNSOption", "DNSSearch", "DropCapability", "Entrypoint", "Environment", "EnvironmentFile", "EnvironmentHost", "Exec", "ExposeHostPort", "GIDMap", "GlobalArgs", "Group", "GroupAdd", "HealthCmd", "HealthInterval", "HealthLogDestination", "HealthMaxLogCount", "HealthMaxLogSize", "HealthOnFailure", "HealthRetries", "HealthStartPeriod", "HealthStartupCmd", "HealthStartupInterval", "HealthStartupRetries", "HealthStartupSuccess", "HealthStartupTimeout", "HealthTimeout", "HostName", "HttpProxy", "IP", "IP6", "Image", "Label", "LogDriver", "LogOpt", "Mask", "Memory", "Mount", "Network", "NetworkAlias", "NoNewPrivileges", "Notify", "PidsLimit", "Pod", "PodmanArgs", "PublishPort", "Pull", "ReadOnly", "ReadOnlyTmpfs", "ReloadCmd", "ReloadSignal", "RemapGid", "RemapUid", "RemapUidSize", "RemapUsers", "Retry", "RetryDelay", "Rootfs", "RunInit", "SeccompProfile", "Secret", "SecurityLabelDisable", "SecurityLabelFileType", "SecurityLabelLevel", "SecurityLabelNested", "SecurityLabelType", "ServiceName", "ShmSize", "StartWithPod", "StopSignal", "StopTimeout", "SubGIDMap", "SubUIDMap", "Sysctl", "Timezone", "Tmpfs", "UIDMap", "Ulimit", "Unmask", "User", "UserNS", "VolatileTmp", "Volume", "WorkingDir"),
	"Volume":    keySet("ContainersConfModule", "Copy", "Device", "Driver", "GlobalArgs", "Group", "Image", "Label", "Options", "PodmanArgs", "ServiceName", "Type", "User", "VolumeName"),
	"Network":   keySet("ContainersConfModule", "DNS", "DisableDNS", "Driver", "Gateway", "GlobalArgs", "IPAMDriver", "IPRange", "IPv6", "InterfaceName", "Internal", "Label", "NetworkDeleteOnStop", "NetworkName", "Options", "PodmanArgs", "ServiceName", "Subnet"),
	"Kube":      keySet("AutoUpdate", "ConfigMap", "ContainersConfModule", "ExitCodePropagation", "GlobalArgs", "KubeDownForce", "LogDriver", "LogOpt", "Network", "PodmanArgs", "PublishPort", "RemapGid", "RemapUid", "RemapUidSize", "RemapUsers", "ServiceName", "SetWorkingDirectory", "UserNS", "Yaml"),
	"Image":     keySet("AllTags", "Arch", "AuthFile", "CertDir", "ContainersConfModule", "Creds", "DecryptionKey", "GlobalArgs", "Image", "ImageTag", "OS", "PodmanArgs", "Policy", "Retry", "RetryDelay", "ServiceName", "TLSVerify", "Variant"),
	"Build":     keySet("Annotation", "Arch", "AuthFile", "BuildArg", "ContainersConfModule", "DNS", "DNSOption", "DNSSearch", "Environment", "File", "ForceRM", "GlobalArgs", "GroupAdd", "IgnoreFile", "ImageTag", "Label", "Network", "PodmanArgs", "Pull", "Retry", "RetryDelay", "Secret", "ServiceName", "SetWorkingDirectory", "TLSVerify", "Target", "Variant", "Volume"),
	"Pod":       keySet("AddHost", "ContainersConfModule", "DNS", "DNSOption", "DNSSearch", "ExitPolicy", "GIDMap", "GlobalArgs", "HostName", "IP", "IP6", "Label", "Network", "NetworkAlias", "PodName", "PodmanArgs", "PublishPort", "RemapGid", "RemapUid", "RemapUidSize", "RemapUsers", "ServiceName", "ShmSize", "StopTimeout", "SubGIDMap", "SubUIDMap", "UIDMap", "UserNS", "Volume"),
	"Quadlet":   keySet("DefaultDependencies"),
}

func keySet(keys ...string) map[string]bool {
	set := make(map[string]bool, len(keys))
	for _, k := range keys {
		set[k] = true
	}
	return set
}
