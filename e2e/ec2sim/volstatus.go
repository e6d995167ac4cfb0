package ec2sim

import "time"

type xVolumeStatusDetail struct {
	Name   string `xml:"name"`
	Status string `xml:"status"`
}

type xVolumeStatusInfo struct {
	Status  string                `xml:"status"`
	Details []xVolumeStatusDetail `xml:"details>item"`
}

type xInitializationStatusDetails struct {
	InitializationType               string `xml:"initializationType"`
	Progress                         int64  `xml:"progress"`
	EstimatedTimeToCompleteInSeconds int64  `xml:"estimatedTimeToCompleteInSeconds"`
}

type xVolumeStatusItem struct {
	VolumeID           string                        `xml:"volumeId"`
	AvailabilityZone   string                        `xml:"availabilityZone"`
	AvailabilityZoneID string                        `xml:"availabilityZoneId"`
	VolumeStatus       xVolumeStatusInfo             `xml:"volumeStatus"`
	Initialization     *xInitializationStatusDetails `xml:"initializationStatusDetails,omitempty"`
}

type describeVolumeStatusResponse struct {
	Statuses  []xVolumeStatusItem `xml:"volumeStatusSet>item"`
	NextToken string              `xml:"nextToken,omitempty"`
}

func (s *Server) volumeStatusXML(v *volume, now time.Time) xVolumeStatusItem {
	initState := "completed"
	if now.Before(v.InitializedAt) {
		initState = "initializing"
	}
	x := xVolumeStatusItem{
		VolumeID: v.ID, AvailabilityZone: v.Zone, AvailabilityZoneID: s.zoneID(v.Zone),
		VolumeStatus: xVolumeStatusInfo{Status: "ok", Details: []xVolumeStatusDetail{
			{Name: "io-enabled", Status: "passed"},
			{Name: "io-performance", Status: "not-applicable"},
			{Name: "initialization-state", Status: initState},
		}},
	}
	if v.SnapshotID != "" {
		eta := int64(0)
		if now.Before(v.InitializedAt) {
			eta = int64(v.InitializedAt.Sub(now).Round(time.Second) / time.Second)
		}
		x.Initialization = &xInitializationStatusDetails{
			InitializationType:               "default",
			Progress:                         progressBetween(v.ReadyAt, v.InitializedAt, now),
			EstimatedTimeToCompleteInSeconds: eta,
		}
	}
	if v.status(now) == "creating" {
		x.VolumeStatus.Status = "insufficient-data"
	}
	return x
}

func (s *Server) describeVolumeStatus(r *request) (any, *apiError) {
	page, next, aerr := s.volumeSelection(func(v *volume, name string) ([]string, bool) {
		switch name {
		case "volume-id":
			return []string{v.ID}, true
		case "availability-zone":
			return []string{v.Zone}, true
		case "volume-status.status":
			return []string{s.volumeStatusXML(v, r.now).VolumeStatus.Status}, true
		case "initialization-state":
			st := "completed"
			if r.now.Before(v.InitializedAt) {
				st = "initializing"
			}
			return []string{st}, true
		}
		return nil, false
	}).page(r, 5, 1000)
	if aerr != nil {
		return nil, aerr
	}
	out := &describeVolumeStatusResponse{NextToken: next}
	for _, id := range page {
		out.Statuses = append(out.Statuses, s.volumeStatusXML(s.st.Volumes[id], r.now))
	}
	return out, nil
}
