package ec2sim

type xAvailabilityZone struct {
	ZoneName           string `xml:"zoneName"`
	ZoneState          string `xml:"zoneState"`
	RegionName         string `xml:"regionName"`
	ZoneID             string `xml:"zoneId"`
	ZoneType           string `xml:"zoneType"`
	OptInStatus        string `xml:"optInStatus"`
	GroupName          string `xml:"groupName"`
	NetworkBorderGroup string `xml:"networkBorderGroup"`
}

type describeAvailabilityZonesResponse struct {
	Zones []xAvailabilityZone `xml:"availabilityZoneInfo>item"`
}

func (s *Server) describeAvailabilityZones(r *request) (any, *apiError) {
	names, ids := r.form.list("ZoneName"), r.form.list("ZoneId")
	for _, n := range names {
		if !s.validZone(n) {
			return nil, errInvalidValue("Invalid availability zone: [%s]", n)
		}
	}
	for _, id := range ids {
		if _, ok := s.zoneByID(id); !ok {
			return nil, errInvalidValue("Invalid availability zone ID: [%s]", id)
		}
	}
	filters, aerr := r.form.filters()
	if aerr != nil {
		return nil, aerr
	}
	if _, aerr := r.form.boolean("AllAvailabilityZones"); aerr != nil {
		return nil, aerr
	}
	out := &describeAvailabilityZonesResponse{}
	for _, z := range s.zones {
		if len(names) > 0 && !contains(names, z) {
			continue
		}
		if len(ids) > 0 && !contains(ids, s.zoneID(z)) {
			continue
		}
		ok, aerr := matchFilters(filters, func(name string) ([]string, bool) {
			switch name {
			case "zone-name":
				return []string{z}, true
			case "zone-id":
				return []string{s.zoneID(z)}, true
			case "region-name", "group-name":
				return []string{s.cfg.Region}, true
			case "state":
				return []string{"available"}, true
			case "zone-type":
				return []string{"availability-zone"}, true
			}
			return nil, false
		})
		if aerr != nil {
			return nil, aerr
		}
		if ok {
			out.Zones = append(out.Zones, xAvailabilityZone{
				ZoneName: z, ZoneState: "available", RegionName: s.cfg.Region, ZoneID: s.zoneID(z),
				ZoneType: "availability-zone", OptInStatus: "opt-in-not-required", GroupName: s.cfg.Region,
				NetworkBorderGroup: s.cfg.Region,
			})
		}
	}
	if aerr := r.stopIfDryRun(); aerr != nil {
		return nil, aerr
	}
	return out, nil
}

func contains(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}
