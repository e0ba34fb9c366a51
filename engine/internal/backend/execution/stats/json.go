package stats

import (
	"encoding/json"
	"math"
	"strconv"
)

// AppendJSON appends c as encoding/json writes it (the same bytes: field
// names, number forms, string escapes), without reflection. A stats
// request over every container encodes one of these per container; in
// the host lab's emulated VM reflection was a tenth of the engine's share
// of such a request. A float that JSON cannot carry (NaN, an infinity),
// which encoding/json refuses whole, is written as null.
func (c *ContainerStats) AppendJSON(b []byte) []byte {
	b = append(b, `{"AvgCPU":`...)
	b = appendFloat(b, c.AvgCPU)
	b = append(b, `,"ContainerID":`...)
	b = appendJSONString(b, c.ContainerID)
	b = append(b, `,"Name":`...)
	b = appendJSONString(b, c.Name)
	b = append(b, `,"PerCPU":`...)
	if c.PerCPU == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i, v := range c.PerCPU {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendUint(b, v, 10)
		}
		b = append(b, ']')
	}
	b = append(b, `,"CPU":`...)
	b = appendFloat(b, c.CPU)
	b = appendUintField(b, `,"CPUNano":`, c.CPUNano)
	b = appendUintField(b, `,"CPUSystemNano":`, c.CPUSystemNano)
	b = appendUintField(b, `,"SystemNano":`, c.SystemNano)
	b = appendUintField(b, `,"MemUsage":`, c.MemUsage)
	b = appendUintField(b, `,"MemLimit":`, c.MemLimit)
	b = append(b, `,"MemPerc":`...)
	b = appendFloat(b, c.MemPerc)
	b = appendUintField(b, `,"NetInput":`, c.NetInput)
	b = appendUintField(b, `,"NetOutput":`, c.NetOutput)
	b = appendUintField(b, `,"BlockInput":`, c.BlockInput)
	b = appendUintField(b, `,"BlockOutput":`, c.BlockOutput)
	b = appendUintField(b, `,"PIDs":`, c.PIDs)
	b = append(b, `,"UpTime":`...)
	b = strconv.AppendInt(b, int64(c.UpTime), 10)
	b = appendUintField(b, `,"Duration":`, c.Duration)
	return append(b, '}')
}

func appendUintField(b []byte, name string, v uint64) []byte {
	return strconv.AppendUint(append(b, name...), v, 10)
}

// appendFloat writes f in encoding/json's form for a float64: plain
// decimals, the exponent form below 1e-6 and from 1e21 on, and an
// exponent without a leading zero (1e-07 becomes 1e-7).
func appendFloat(b []byte, f float64) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(b, "null"...)
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

// appendJSONString appends s as a JSON string the way encoding/json writes
// it. A name or ID of printable ASCII with nothing to escape (every one
// the engine makes) is copied as it is; anything else goes through
// encoding/json.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			quoted, err := json.Marshal(s)
			if err != nil { // not reached: a Go string always encodes
				return append(b, `""`...)
			}
			return append(b, quoted...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
