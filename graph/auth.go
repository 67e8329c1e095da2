package graph

import (
	"github.com/actionsledger/actionsledger/auth"
	"github.com/actionsledger/actionsledger/graph/model"
)

// principalModel is p as the API shows it.
func principalModel(p auth.Principal) model.Principal {
	out := model.Principal{ID: p.ID, Policies: make([]model.Policy, len(p.Policies))}
	for i, pol := range p.Policies {
		out.Policies[i] = model.Policy{Action: model.PolicyAction(pol.Action), Resource: pol.Resource}
	}
	return out
}
