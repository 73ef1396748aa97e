"""What keel lets a call do: permission rules and shell analysis, the sandbox, secret redaction and the result guard."""
