package judge

import (
	"math"
	"strconv"

	"github.com/pixie-dev/pixie/sdk/abi"
)

// answerKeys are the valid answers of q as they appear in Answer.Probabilities, in order:
// "yes", "no" for bool; the option names for select; "0".."n-1" for score.
func answerKeys(q abi.Question) []string {
	switch q.Type {
	case abi.JudgeBool:
		return []string{"yes", "no"}
	case abi.JudgeSelect:
		keys := make([]string, len(q.Criteria.Options))
		for i, o := range q.Criteria.Options {
			keys[i] = o.Name
		}
		return keys
	default:
		keys := make([]string, len(q.Criteria.Levels))
		for i := range keys {
			keys[i] = strconv.Itoa(i)
		}
		return keys
	}
}

// buildAnswer turns weights over answerKeys(q) (non-negative, not all zero, any scale) into an
// Answer: renormalised probabilities, label, yes/score and confidence. ok is false when no
// valid answer has any weight.
func buildAnswer(q abi.Question, weights []float64) (abi.Answer, bool) {
	var sum float64
	for _, w := range weights {
		if w < 0 || math.IsNaN(w) || math.IsInf(w, 0) {
			return abi.Answer{}, false
		}
		sum += w
	}
	if !(sum > 0) || math.IsInf(sum, 0) {
		return abi.Answer{}, false
	}
	p := make([]float64, len(weights))
	for i, w := range weights {
		p[i] = w / sum
	}
	keys := answerKeys(q)
	a := abi.Answer{Type: q.Type, Probabilities: make(map[string]float64, len(keys))}
	for i, k := range keys {
		a.Probabilities[k] = round6(p[i])
	}
	switch q.Type {
	case abi.JudgeBool:
		yes := round6(p[0])
		a.Yes = &yes
		a.Label = "no"
		if yes >= 0.5 {
			a.Label = "yes"
		}
		a.Confidence = round6(entropyConfidence(p))
	case abi.JudgeSelect:
		best := 0
		for i := range p {
			if p[i] > p[best] {
				best = i
			}
		}
		a.Label = keys[best]
		a.Confidence = round6(entropyConfidence(p))
	default:
		var mean float64
		for i := range p {
			mean += float64(i) * p[i]
		}
		score := round6(mean)
		a.Score = &score
		a.Label = strconv.Itoa(int(math.Round(mean)))
		a.Confidence = round6(spreadConfidence(p, mean))
	}
	return a, true
}

// entropyConfidence is 1 − H(p)/ln(n): 1 when all probability is on one answer, 0 when it is
// spread evenly over all n valid answers. Used for bool and select, whose answers have no order.
func entropyConfidence(p []float64) float64 {
	if len(p) < 2 {
		return 1
	}
	var h float64
	for _, x := range p {
		if x > 0 {
			h -= x * math.Log(x)
		}
	}
	return clamp01(1 - h/math.Log(float64(len(p))))
}

// spreadConfidence is 1 − σ/σmax for a score: σ is the standard deviation of the level under
// p around the mean, and σmax = (n−1)/2 is the largest possible (half the probability on each
// end of the scale). Unlike entropy it knows the levels are ordered: doubt between two
// neighbouring levels costs less confidence than doubt between the two ends.
func spreadConfidence(p []float64, mean float64) float64 {
	n := len(p)
	if n < 2 {
		return 1
	}
	var v float64
	for i, x := range p {
		d := float64(i) - mean
		v += x * d * d
	}
	return clamp01(1 - math.Sqrt(v)/(float64(n-1)/2))
}

func clamp01(x float64) float64 {
	switch {
	case x < 0:
		return 0
	case x > 1:
		return 1
	}
	return x
}

// round6 rounds to six decimals, so printed probabilities carry no float noise.
func round6(x float64) float64 { return math.Round(x*1e6) / 1e6 }
