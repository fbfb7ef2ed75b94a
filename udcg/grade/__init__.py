"""The grader stage: LLM-as-judge and rule-based judges for passage relevance, 1-5 utility grades
and answer outcomes, with strict reply parsing and judge agreement.

- ``templates``: the versioned judge prompts (package data in ``prompts/``) and safe filling;
- ``parsing``: strict JSON reply parsing with named repairs;
- ``rules``: containment, exact match, token F1, abstention detection (no model);
- ``judges``: ``LLMJudge`` (any ``udcg.llm.base.Backend``) and ``RuleJudge``;
- ``runner``: inputs, the resumable cache-backed run, summary, writing labels back;
- ``agreement``: confusion matrix and Cohen's kappa between two judges.
"""
