package deploycheck

var s3ValueEffects = map[string]valueEffect{}
