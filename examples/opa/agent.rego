# The security team's policy for agent tool calls, evaluated by OPA through @ai-sdk/policy-opa
# (examples/opa-composition.ts). Baton keeps the conversation's own rules (steps, sequences,
# amounts, limits); this policy keeps the company-wide list of payees nobody may pay.
#
#   opa run --server --addr localhost:8181 examples/opa/agent.rego examples/opa/data.json
package agent.call

import rego.v1

# No opinion unless a rule below matches: the call goes on to the next check.
default decision := {"decision": "not-applicable"}

decision := {"decision": "deny", "reason": sprintf("payee %s is blocked by the security team", [input.args.to])} if {
	input.tool.name == "pay"
	input.args.to in data.blocked_payees
}
