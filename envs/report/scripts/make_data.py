"""Writes ``data/tasks.jsonl`` and ``calibration.jsonl`` from ``data/documents/*.md`` and the tables below.

    python envs/report/scripts/make_data.py           # rewrite both files
    python envs/report/scripts/make_data.py --check   # exit 1 if they are out of date

Each document is a Markdown file whose first line is ``# Title``. Each task names its document, an
instruction, a form (paragraph, sentence, bullets or numbered) with a word limit and, for lists, an item
count; its key facts (what a complete answer states, used by the key_facts check and for the judge's
calibration labels) with one case-insensitive regular expression per fact; and a hand-written reference
answer that keeps to the constraints and states every key fact. Calibration items repeat the prompt
columns of their task (the judge sees the rendered prompt; the task id alone is not looked up) plus a
candidate answer, its kind and the human label ``expected`` in [0, 1].
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = ROOT / "data" / "documents"
TASKS_FILE = ROOT / "data" / "tasks.jsonl"
CALIBRATION_FILE = ROOT / "calibration.jsonl"


def task(
    id: str,
    doc: str,
    instruction: str,
    form: str,
    max_words: int,
    facts: list[tuple[str, str]],
    reference: str,
    *,
    items: tuple[int, int] = (0, 0),
    difficulty: int = 1,
) -> dict[str, Any]:
    return {
        "id": id,
        "doc": doc,
        "instruction": instruction,
        "form": form,
        "max_words": max_words,
        "min_items": items[0],
        "max_items": items[1],
        "difficulty": difficulty,
        "key_facts": [fact for fact, _ in facts],
        "fact_patterns": [pattern for _, pattern in facts],
        "reference": reference,
    }


TASKS = [
    # -- incident post-mortem ---------------------------------------------------------------------------------
    task(
        "inc-1",
        "incident-postmortem",
        "Summarise this post-mortem for an executive.",
        "paragraph",
        80,
        [
            ("checkout failed intermittently for 47 minutes", r"47[ -]minute"),
            ("about 18% of checkout attempts failed", r"18 ?%"),
            (
                "a configuration change in release v5.12 cut the database connection pool from 200 to 20",
                r"connection pool",
            ),
            ("rolling back the release fixed it", r"roll(ed|ing)?[ -]?back|revert"),
        ],
        "On 14 March, Fernhill's checkout failed intermittently for 47 minutes: about 18% of checkout attempts "
        "errored and roughly 3,400 orders were lost. A configuration change in release v5.12 cut the database "
        "connection pool from 200 to 20 connections, so requests timed out; rolling back the release fixed it. "
        "No alert fired because paging starts at 25% errors. Follow-ups add CI validation, a lower alert "
        "threshold and a canary stage.",
    ),
    task(
        "inc-2",
        "incident-postmortem",
        "List the three follow-up actions and who owns each.",
        "numbered",
        70,
        [
            ("Priya Nair owns one action", r"priya"),
            ("Jonas Weber owns one action", r"jonas"),
            ("Amara Okafor owns one action", r"amara"),
            ("validate connection pool sizes in CI", r"\bci\b|validat"),
            ("lower the paging threshold from 25% to 5%", r"threshold|alert"),
            ("add a canary stage before full rollout", r"canary"),
        ],
        "1. Validate connection pool sizes in CI and reject production values below 100 (Priya Nair, due 29 March).\n"
        "2. Lower the checkout paging threshold from 25% to 5% (Jonas Weber, due 22 March).\n"
        "3. Add a canary stage that sends 5% of traffic to a new release for 15 minutes (Amara Okafor, due 12 April).",
        items=(3, 3),
    ),
    task(
        "inc-3",
        "incident-postmortem",
        "Why did it take so long to detect the outage?",
        "sentence",
        35,
        [
            ("the paging alert fires only above a 25% error rate", r"25 ?%"),
            ("the error rate peaked at 18%, so the alert never fired", r"18 ?%"),
            ("the team learned about it from customers through support", r"customer|support"),
        ],
        "The paging alert only fires when checkout errors exceed 25% for five minutes, but errors peaked at 18%, "
        "so nobody was paged and the team learned of the outage from customer complaints.",
        difficulty=2,
    ),
    task(
        "inc-4",
        "incident-postmortem",
        "What was the impact on customers?",
        "bullets",
        60,
        [
            ("about 18% of checkout attempts failed", r"18 ?%"),
            ("roughly 3,400 orders could not be placed", r"3,?400"),
            (
                "no customer was charged twice and no order data was lost",
                r"charged twice|double[- ]charg|no (order )?data",
            ),
        ],
        "- About 18% of checkout attempts failed over 47 minutes on 14 March.\n"
        "- Roughly 3,400 orders could not be placed.\n"
        "- No customer was charged twice and no order data was lost.",
        items=(1, 3),
    ),
    # -- product changelog ------------------------------------------------------------------------------------
    task(
        "cl-1",
        "product-changelog",
        "What changed for users?",
        "bullets",
        90,
        [
            ("offline mode on mobile", r"offline"),
            ("shared notebooks can have up to 50 members (was 10)", r"\b50\b"),
            ("Markdown tables in notes", r"table"),
            ("the legacy sync API v1 is switched off", r"\bv1\b"),
            ("iOS 16 is the new minimum", r"ios 16"),
        ],
        "- Offline mode on mobile: notes opened in the last 30 days work without a connection.\n"
        "- Shared notebooks can have up to 50 members, up from 10.\n"
        "- Markdown tables can be inserted and edited in any note.\n"
        "- Export now defaults to Markdown instead of HTML, and iOS 16 is the new minimum.\n"
        "- The legacy sync API v1 is switched off; integrations must move to v2.",
        items=(2, 5),
    ),
    task(
        "cl-2",
        "product-changelog",
        "Summarise the release in one sentence for a customer newsletter.",
        "sentence",
        35,
        [
            ("offline mode on mobile", r"offline"),
            ("shared notebooks with up to 50 members", r"\b50\b"),
            ("Markdown tables", r"table"),
        ],
        "Lumen Notes 3.2 brings offline mode on mobile, shared notebooks with up to 50 members, and Markdown "
        "tables in every note.",
        difficulty=2,
    ),
    task(
        "cl-3",
        "product-changelog",
        "Which changes could break existing setups, and how?",
        "paragraph",
        70,
        [
            ("integrations on sync API v1 stop syncing until they move to v2", r"\bv1\b"),
            ("iOS 15 devices stop receiving updates (iOS 16 minimum)", r"ios 1[56]"),
            ("the default export format changed from HTML to Markdown", r"export|html"),
        ],
        "Three changes can break things. Integrations still using the legacy sync API v1 stop syncing until they "
        "move to sync API v2. Devices on iOS 15 keep version 3.1 but get no further updates, since iOS 16 is now "
        "the minimum. Anything expecting HTML exports may break, because the default export format is now "
        "Markdown, though HTML remains in the export menu.",
        difficulty=3,
    ),
    task(
        "cl-4",
        "product-changelog",
        "List the bug fixes in this release.",
        "bullets",
        60,
        [
            ("search finds notes with emoji in their titles", r"emoji"),
            ("no crash on Android when pasting images over 20 MB", r"android|20 ?mb"),
            ("reminders fire on time after daylight-saving changes", r"daylight|reminder"),
        ],
        "- Search no longer misses notes with emoji in their titles.\n"
        "- Pasting an image larger than 20 MB no longer crashes the Android app.\n"
        "- Reminders fire at the right time after a daylight-saving time change.",
        items=(3, 3),
    ),
    # -- meeting transcript -----------------------------------------------------------------------------------
    task(
        "mt-1",
        "meeting-transcript",
        "Summarise the decisions made in this meeting.",
        "bullets",
        70,
        [
            ("signup goes from five steps to three", r"\bthree\b|\b3 steps"),
            ("social login is deferred to Q3", r"social login|google|microsoft"),
            ("email verification stays but moves after the first project", r"verif"),
            ("an A/B test starts on 20 May", r"20 may|may 20"),
        ],
        "- Signup is cut from five steps to three: account, workspace name, and invite teammates.\n"
        "- Social login is deferred to Q3.\n"
        "- Email verification stays but moves to after the user creates a first project.\n"
        "- The new flow is A/B tested against the current one from 20 May.",
        items=(2, 4),
    ),
    task(
        "mt-2",
        "meeting-transcript",
        "List the action items with owners and deadlines.",
        "numbered",
        60,
        [
            ("Marta delivers the final mockups by 10 May", r"marta[^\n]*10 may|10 may[^\n]*marta"),
            ("Leo sends the engineering estimate by 13 May", r"leo[^\n]*13 may|13 may[^\n]*leo"),
            ("Sam updates the help-center article before 20 May", r"sam[^\n]*20 may|20 may[^\n]*sam"),
        ],
        "1. Marta: deliver the final mockups by 10 May.\n"
        "2. Leo: send the engineering estimate by 13 May.\n"
        "3. Sam: update the help-center article on verification before the test starts on 20 May.",
        items=(3, 3),
    ),
    task(
        "mt-3",
        "meeting-transcript",
        "What was the main disagreement, and how was it resolved?",
        "paragraph",
        60,
        [
            ("it was about dropping email verification at signup", r"verif"),
            ("Sam warned that unverified accounts bring spam and fake workspaces", r"spam|fake"),
            ("verification stays but happens after the first project", r"first project"),
        ],
        "Leo wanted to drop email verification at signup because many people give up there. Sam objected that "
        "most spam workspaces came from unverified accounts. Following Marta's suggestion, they agreed to keep "
        "verification but move it to after the user creates a first project, and unverified accounts cannot "
        "invite anyone.",
        difficulty=2,
    ),
    task(
        "mt-4",
        "meeting-transcript",
        "Write a one-sentence status update for stakeholders who missed the meeting.",
        "sentence",
        40,
        [
            ("onboarding goes to three steps", r"\bthree\b|\b3 steps"),
            ("social login waits until Q3", r"social login|\bq3\b"),
            ("the A/B test starts on 20 May", r"20 may|may 20"),
        ],
        "The team agreed to cut onboarding from five steps to three, defer social login to Q3, and A/B test the "
        "new flow from 20 May.",
        difficulty=2,
    ),
    # -- sales memo -------------------------------------------------------------------------------------------
    task(
        "sm-1",
        "sales-memo",
        "Summarise this memo for an executive.",
        "paragraph",
        80,
        [
            ("Q2 revenue was EUR 4.2 million", r"4\.2"),
            ("up 12% on Q1", r"12 ?%"),
            ("93% of the EUR 4.5 million target, so the target was missed", r"93 ?%|4\.5"),
            ("SMB churn rose to 3.1% a month", r"churn"),
        ],
        "EMEA revenue reached €4.2 million in Q2, up 12% on Q1 but only 93% of the €4.5 million target. "
        "Enterprise grew 21% while SMB fell 6%, with SMB churn rising to 3.1% a month. Germany led and France "
        "finished 15% under target. The main risks are two August renewals worth about €1.1 million, SMB churn, "
        "and France's two unfilled account executive roles.",
    ),
    task(
        "sm-2",
        "sales-memo",
        "List the three main risks.",
        "bullets",
        70,
        [
            ("the August renewals of Halvorsen Logistics and Brightwater Bank", r"renewal|halvorsen|brightwater"),
            ("rising SMB churn", r"churn"),
            ("France cannot recover without two account executives", r"france"),
        ],
        "- Losing either August renewal, Halvorsen Logistics or Brightwater Bank, would put the Q3 target out of reach.\n"
        "- Rising SMB churn, now 3.1% a month, could cancel out enterprise growth.\n"
        "- France cannot recover without its two missing account executives.",
        items=(3, 3),
    ),
    task(
        "sm-3",
        "sales-memo",
        "Which segment and which country did best, and which did worst?",
        "paragraph",
        50,
        [
            ("enterprise was the best segment (+21%)", r"enterprise"),
            ("SMB was the worst segment (-6%)", r"\bsmb\b"),
            ("Germany was the best country (EUR 1.6 million)", r"germany"),
            ("France was the worst country (15% below target)", r"france"),
        ],
        "Enterprise was the best segment, growing 21%, and SMB the worst, falling 6%. Germany was the strongest "
        "country with €1.6 million, ahead of target, and France the weakest, finishing 15% below target.",
        difficulty=2,
    ),
    task(
        "sm-4",
        "sales-memo",
        "What does the memo recommend?",
        "numbered",
        60,
        [
            ("hire the two account executives for France now", r"account executive|\bhir"),
            ("assign an executive sponsor to each August renewal", r"sponsor"),
            ("launch an SMB retention offer (15% off annual plans)", r"retention|discount|annual"),
        ],
        "1. Hire the two account executives for France now rather than in Q4.\n"
        "2. Assign an executive sponsor to each of the two August renewals.\n"
        "3. Launch an SMB retention offer with a 15% discount for switching to an annual plan.",
        items=(3, 3),
    ),
    # -- research abstracts -----------------------------------------------------------------------------------
    task(
        "ra-1",
        "research-abstracts",
        "Summarise the main finding of each abstract.",
        "numbered",
        90,
        [
            ("A: a 20-minute nap improved recall by 14%", r"14 ?%"),
            ("B: blue light delayed sleep onset by 23 minutes", r"\b23\b"),
            ("B: no effect on next-day recall", r"no effect|not affect|did not change|no change|unchanged"),
            ("C: sleep deprivation moderately reduces working memory (41 studies, d = 0.45)", r"0?\.45|moderate"),
        ],
        "1. A 20-minute nap helped 64 students recall 14% more word pairs two hours later.\n"
        "2. Unfiltered screens before bed delayed sleep onset by 23 minutes on average in 120 adults, with no "
        "effect on next-day recall.\n"
        "3. Across 41 studies, sleep deprivation reduced working memory with a moderate effect size (d = 0.45).",
        items=(3, 3),
    ),
    task(
        "ra-2",
        "research-abstracts",
        "What limitations do the authors report?",
        "bullets",
        70,
        [
            ("A: all participants were young university students", r"student|young"),
            ("B: sleep was measured for only one week", r"one week|1 week|one-week"),
            ("C: high heterogeneity between studies", r"heterogen"),
        ],
        "- Abstract A: all participants were young university students, so results may not apply to older adults.\n"
        "- Abstract B: sleep was measured for only one week, so longer studies are needed.\n"
        "- Abstract C: heterogeneity between studies was high, limiting how precisely the effect size can be "
        "estimated.",
        items=(3, 3),
        difficulty=2,
    ),
    task(
        "ra-3",
        "research-abstracts",
        "Do these abstracts support the claim that using screens at bedtime harms memory?",
        "paragraph",
        60,
        [
            ("no, not directly", r"\bno\b|\bnot\b"),
            ("screens delayed sleep onset by 23 minutes", r"\b23\b"),
            ("but had no effect on next-day recall", r"no effect|not affect|did not change|no change|unchanged"),
            ("the meta-analysis concerns sleep deprivation, not screens", r"depriv"),
        ],
        "Not really. Abstract B found that unfiltered screens delayed sleep onset by 23 minutes but had no effect "
        "on next-day recall. Abstract C links a full night of sleep deprivation to worse working memory, which is "
        "far more than a short delay, so it does not show that bedtime screens harm memory.",
        difficulty=3,
    ),
    task(
        "ra-4",
        "research-abstracts",
        "Give a one-sentence plain-language takeaway for a general audience.",
        "sentence",
        35,
        [
            ("a short nap helps memory", r"\bnap"),
            (
                "losing sleep hurts working memory",
                r"depriv|lack of sleep|losing (a night of )?sleep|without sleep|no sleep|missing sleep|sleepless",
            ),
        ],
        "A short nap can help you remember things, while losing a night of sleep makes it harder to hold and "
        "update information in your head.",
        difficulty=2,
    ),
    # -- support ticket log -----------------------------------------------------------------------------------
    task(
        "st-1",
        "support-ticket-log",
        "What is the most frequent issue, and how many tickets mention it?",
        "sentence",
        30,
        [
            ("the Safari 17 login loop", r"safari"),
            ("five tickets", r"\b5\b|\bfive\b"),
        ],
        "The most frequent issue is a login loop on Safari 17, reported in five of the twelve tickets.",
    ),
    task(
        "st-2",
        "support-ticket-log",
        "Group this week's tickets into categories, with a count for each.",
        "bullets",
        70,
        [
            ("login loop: 5", r"(login|sign[- ]in)[^\n]*\b(5|five)\b|\b(5|five)\b[^\n]*(login|sign[- ]in)"),
            (
                "invoices missing VAT numbers: 3",
                r"(invoice|vat|billing)[^\n]*\b(3|three)\b|\b(3|three)\b[^\n]*(invoice|vat|billing)",
            ),
            ("CSV export timeouts: 2", r"(csv|export)[^\n]*\b(2|two)\b|\b(2|two)\b[^\n]*(csv|export)"),
            ("a dark mode feature request: 1", r"dark mode|feature"),
            ("a refund request: 1", r"refund"),
        ],
        "- Safari 17 login loop: 5 tickets\n"
        "- Invoice PDF missing VAT number: 3 tickets\n"
        "- CSV export timeouts: 2 tickets\n"
        "- Feature request (dark mode): 1 ticket\n"
        "- Refund request: 1 ticket",
        items=(3, 5),
        difficulty=2,
    ),
    task(
        "st-3",
        "support-ticket-log",
        "Which issues should be escalated to engineering, and why?",
        "paragraph",
        60,
        [
            ("the Safari login loop, which blocks customers", r"safari|login"),
            ("missing VAT numbers on invoices, a compliance problem", r"\bvat\b|invoice"),
            ("CSV exports timing out above about 50,000 rows", r"\bcsv\b|export"),
        ],
        "Three issues need engineering fixes rather than workarounds: the Safari 17 login loop, which blocks five "
        "customers completely; the missing VAT number on invoice PDFs, a compliance problem for EU business "
        "customers; and CSV exports timing out above roughly 50,000 rows, whose workaround is clumsy for large "
        "customers.",
        difficulty=2,
    ),
    task(
        "st-4",
        "support-ticket-log",
        "Summarise the week for the support lead.",
        "paragraph",
        60,
        [
            ("twelve tickets", r"\btwelve\b|\b12\b"),
            ("the Safari login loop was the top issue", r"safari|login"),
            ("median first response of 3.5 hours, inside the 4-hour target", r"3\.5"),
        ],
        "Twelve tickets came in, with a median first response of 3.5 hours against the 4-hour target, and two "
        "remain open. The Safari 17 login loop was the top issue with five tickets, followed by invoices missing "
        "VAT numbers and CSV export timeouts; all three need engineering fixes.",
    ),
    # -- policy change notice ---------------------------------------------------------------------------------
    task(
        "pc-1",
        "policy-change-notice",
        "What changes for employees?",
        "bullets",
        90,
        [
            ("up to three remote days a week, up from two", r"three days|\b3 days"),
            ("core hours 10:00 to 15:00", r"10:00|core hours"),
            ("up to 20 working days abroad a year with HR approval", r"\b20\b|abroad"),
            ("a one-time EUR 300 equipment stipend", r"\b300\b"),
            ("new hires work four office days a week for 90 days", r"\b90\b|new hire|new employee"),
        ],
        "- Remote work rises to three days per week, up from two, on schedules approved by managers.\n"
        "- Everyone must be available during core hours, 10:00 to 15:00 local time.\n"
        "- Working from abroad is allowed for up to 20 working days a year with HR approval.\n"
        "- A one-time €300 home office stipend can be claimed through Finance.\n"
        "- New hires work from the office four days a week for their first 90 days.",
        items=(2, 5),
    ),
    task(
        "pc-2",
        "policy-change-notice",
        "Summarise the notice.",
        "paragraph",
        50,
        [
            ("effective 1 July", r"1 july|july 1"),
            ("up to three remote days a week", r"\bthree\b|\b3 days"),
            ("core hours", r"10:00|core hours"),
        ],
        "From 1 July, employees may work remotely up to three days a week, must be available 10:00 to 15:00, and "
        "may work abroad up to 20 days a year with HR approval. There is a €300 equipment stipend, and new hires "
        "work four office days weekly for 90 days.",
    ),
    task(
        "pc-3",
        "policy-change-notice",
        "An employee wants to work from Lisbon for three weeks in August. What does the policy say?",
        "paragraph",
        60,
        [
            ("working abroad is limited to 20 working days a year", r"\b20\b"),
            ("the stay needs HR approval", r"\bhr\b"),
            ("requested at least two weeks in advance", r"two weeks|2 weeks"),
        ],
        "It is possible. Working from abroad is allowed for up to 20 working days per calendar year, so three "
        "weeks fits if the allowance is not already used up. The stay needs HR approval, requested at least two "
        "weeks in advance because of tax and insurance rules.",
        difficulty=3,
    ),
    task(
        "pc-4",
        "policy-change-notice",
        "Who approves what under the new policy?",
        "bullets",
        50,
        [
            ("managers approve weekly remote schedules", r"manager"),
            ("HR approves working from abroad", r"\bhr\b"),
            ("Finance approves stipend claims", r"finance"),
        ],
        "- Managers approve each employee's weekly remote schedule.\n"
        "- HR approves stays abroad, requested at least two weeks ahead.\n"
        "- Finance approves home office stipend claims, which need a receipt.",
        items=(3, 3),
        difficulty=2,
    ),
    # -- API deprecation notice -------------------------------------------------------------------------------
    task(
        "ap-1",
        "api-deprecation-notice",
        "What must API clients change to migrate to v2?",
        "bullets",
        80,
        [
            ("authenticate with OAuth 2.0 client credentials instead of API keys", r"oauth"),
            ("use cursor-based pagination", r"cursor"),
            ("send amounts as integers in minor units", r"minor units|integer|cents"),
            ("verify webhooks with the X-Orders-Signature header", r"x-orders-signature"),
        ],
        "- Authenticate with OAuth 2.0 client credentials instead of static API keys.\n"
        "- Use cursor-based pagination with next_cursor instead of page offsets.\n"
        "- Send money amounts as integers in minor units, such as 1250 for 12.50 EUR.\n"
        "- Verify webhooks with the renamed X-Orders-Signature header.\n"
        "- SDK users can upgrade to version 4.0 or later, which handles most of this.",
        items=(3, 5),
    ),
    task(
        "ap-2",
        "api-deprecation-notice",
        "List the key dates in chronological order.",
        "numbered",
        70,
        [
            ("1 February 2025: v1 deprecated", r"1 february|february 1\b"),
            ("15 April 2025: first brownout", r"15 april|april 15"),
            ("1 May 2025: contact your account manager if you cannot finish", r"\b1 may|may 1\b"),
            ("13 May 2025: second brownout", r"13 may|may 13"),
            ("30 June 2025: shutdown, HTTP 410", r"30 june|june 30"),
        ],
        "1. 1 February 2025: Orders API v1 deprecated.\n"
        "2. 15 April 2025: one-hour brownout, 14:00 to 15:00 UTC.\n"
        "3. 1 May 2025: deadline to contact your account manager if you cannot finish in time.\n"
        "4. 13 May 2025: second one-hour brownout.\n"
        "5. 30 June 2025: v1 shut down; requests fail with HTTP 410.",
        items=(4, 5),
    ),
    task(
        "ap-3",
        "api-deprecation-notice",
        "Summarise the notice for a non-technical product manager.",
        "paragraph",
        60,
        [
            ("v1 stops working on 30 June 2025", r"30 june|june 30"),
            ("integrations must move to v2", r"\bv2\b"),
            ("temporary brownouts come first as a warning", r"brownout|switched off|temporar|outage"),
        ],
        "The old Orders API v1 stops working on 30 June 2025, so every integration that uses it must move to v2 "
        "before then. As a warning, v1 will be switched off for an hour on 15 April and 13 May. Teams that cannot "
        "finish in time should contact their account manager before 1 May.",
        difficulty=2,
    ),
    task(
        "ap-4",
        "api-deprecation-notice",
        "What happens to a client that does nothing?",
        "sentence",
        40,
        [
            ("its requests fail (HTTP 410 Gone)", r"\b410\b|\bfail"),
            ("permanently from 30 June 2025", r"30 june|june 30"),
            ("and already during the brownouts on 15 April and 13 May", r"15 april|13 may|brownout"),
        ],
        "Its v1 requests will fail during the brownouts on 15 April and 13 May 2025, and from 30 June 2025 every "
        "request will fail with HTTP 410 Gone.",
        difficulty=2,
    ),
]


def example(task_id: str, kind: str, expected: float, completion: str) -> dict[str, Any]:
    return {"task_id": task_id, "kind": kind, "expected": expected, "completion": completion}


# Labels follow rubric.md: the share of key facts stated, rounded to a quarter; any invented or contradicted
# fact scores at most 0.1; a broken length or form constraint at most 0.25; off topic or a refusal 0.
CALIBRATION = [
    example(
        "inc-1",
        "good",
        1.0,
        "Checkout at Fernhill failed on and off for 47 minutes on 14 March: around 18% of attempts errored and "
        "about 3,400 orders were lost, though nobody was charged twice. A config change shipped in v5.12 shrank "
        "the database connection pool from 200 to 20, so requests timed out; rolling back fixed it. Alerts never "
        "fired because the threshold was 25%. Fixes: CI checks on pool sizes, a 5% alert threshold, a canary stage.",
    ),
    example(
        "inc-1",
        "hallucinated",
        0.1,
        "Checkout failed for 47 minutes on 14 March and about 18% of attempts errored. The cause was a failed "
        "database upgrade by the hosting vendor that exhausted the connection pool; the team rolled back after "
        "2 hours, and lost revenue is estimated at $850,000.",
    ),
    example(
        "inc-2",
        "partial",
        0.5,
        "1. Validate connection pool sizes in CI.\n2. Lower the paging threshold.\n3. Add a canary stage.",
    ),
    example(
        "inc-3",
        "good",
        1.0,
        "Detection was slow because paging needs more than 25% errors for five minutes, while errors peaked at "
        "18%, so nobody was paged until support reported customer complaints at 09:31.",
    ),
    example(
        "inc-4",
        "off-length",
        0.25,
        "- About 18% of checkout attempts failed.\n- Roughly 3,400 orders could not be placed.\n"
        "- No customer was charged twice.\n- No order data was lost.\n"
        "- The outage lasted 47 minutes, from 09:12 to 09:59 UTC.",
    ),
    example(
        "cl-1",
        "good",
        1.0,
        "- Mobile apps now work offline for notes opened in the past 30 days.\n"
        "- Shared notebooks take up to 50 members instead of 10.\n- Notes support Markdown tables.\n"
        "- iOS 16 is now required, and exports default to Markdown.\n"
        "- Sync API v1 is gone, so old integrations must switch to v2.",
    ),
    example(
        "cl-1",
        "off-topic",
        0.0,
        "- Lumen Notes is a popular note-taking app.\n- It runs on many platforms.\n"
        "- Users should always keep their apps updated for security.\n- Contact support with any questions.",
    ),
    example(
        "cl-2",
        "hallucinated",
        0.0,
        "Lumen Notes 3.2 adds offline mode on mobile, shared notebooks for up to 100 members, Markdown tables "
        "and a new writing assistant.",
    ),
    example(
        "cl-3",
        "partial",
        0.75,
        "Integrations on the old sync API v1 stop syncing until they move to v2, and iPhones on iOS 15 no longer "
        "get updates because iOS 16 is now the minimum.",
    ),
    example(
        "mt-1",
        "good",
        1.0,
        "- Onboarding drops from five steps to three.\n- Google and Microsoft sign-in wait until Q3.\n"
        "- Email verification is kept, but happens after the first project is created.\n"
        "- An A/B test against the current flow starts on 20 May.",
    ),
    example(
        "mt-2",
        "hallucinated",
        0.1,
        "1. Marta: final mockups by 10 May.\n2. Leo: engineering estimate by 16 May.\n"
        "3. Dana: announce the new flow to customers by 30 May.",
    ),
    example(
        "mt-3",
        "good",
        1.0,
        "Leo proposed dropping email verification at signup since many users abandon there, but Sam pushed back "
        "because most spam workspaces came from unverified accounts. Everyone accepted Marta's compromise: keep "
        "verification, but ask for it after the user's first project, and block unverified accounts from "
        "inviting anyone.",
    ),
    example(
        "mt-4",
        "off-topic",
        0.0,
        "The meeting was productive and everyone shared their views openly, which is a great sign for team culture.",
    ),
    example(
        "sm-1",
        "partial",
        0.5,
        "EMEA revenue was €4.2 million in Q2, up 12% on Q1. Enterprise grew strongly and Germany remained the "
        "strongest market, and the Q3 pipeline stands at €9.8 million.",
    ),
    example(
        "sm-1",
        "off-length",
        0.25,
        "In Q2 the EMEA region brought in €4.2 million of revenue. That is 12% more than in Q1, which sounds good, "
        "but it is still below the €4.5 million target: the region reached 93% of it. Looking at segments, "
        "enterprise grew 21% thanks to three new logistics customers, while SMB fell 6%. SMB churn rose from 2.4% "
        "to 3.1% of accounts per month, mostly because of the January price increase. Germany was the strongest "
        "market with €1.6 million, the Nordics were on target and France finished 15% below target. The Q3 "
        "pipeline is €9.8 million, but two renewals worth about €1.1 million are at risk in August.",
    ),
    example(
        "sm-2",
        "good",
        1.0,
        "- The August renewals of Halvorsen Logistics and Brightwater Bank, worth about €1.1 million a year, are "
        "at risk.\n- SMB churn has risen to 3.1% a month and could erase enterprise gains.\n"
        "- France stays below target until two account executives are hired.",
    ),
    example(
        "sm-3",
        "hallucinated",
        0.1,
        "Enterprise was the best segment, up 21%, and SMB the worst, down 6%. Germany led with €2.3 million, "
        "while France was worst at 15% below target.",
    ),
    example(
        "sm-4",
        "wrong-form",
        0.25,
        "The memo recommends hiring the two French account executives now, giving each August renewal an "
        "executive sponsor, and offering SMB customers a 15% discount on annual plans.",
    ),
    example(
        "ra-1",
        "good",
        1.0,
        "1. Study A: students who took a 20-minute nap recalled 14% more word pairs than those who watched a video.\n"
        "2. Study B: unfiltered screens delayed sleep onset by 23 minutes but did not change next-day recall.\n"
        "3. Study C: pooling 41 studies, sleep deprivation moderately impaired working memory (d = 0.45).",
    ),
    example("ra-2", "off-topic", 0.0, "I'm sorry, but I can't help with questions about medical research."),
    example("ra-3", "partial", 0.5, "No. The blue-light study found no effect on next-day recall."),
    example("ra-4", "hallucinated", 0.1, "Sleeping 8 hours a night boosts memory by 40%, and even a short nap helps."),
    example(
        "st-1",
        "good",
        1.0,
        "Five tickets report the same Safari 17 login loop, making it the week's most common problem.",
    ),
    example("st-2", "partial", 0.5, "- Login problems: 5 tickets\n- Billing: 3 tickets\n- Other: 4 tickets"),
    example(
        "st-3",
        "off-topic",
        0.0,
        "Escalate everything to engineering so that support never has to deal with technical problems again; "
        "this keeps customers happy.",
    ),
    example(
        "st-4",
        "off-length",
        0.25,
        "This week support received twelve tickets in total. The median first-response time was 3.5 hours, "
        "which is inside our 4-hour target, and two tickets are still open. The biggest problem by far was a "
        "login loop on Safari 17, which came up in five tickets and blocks affected customers completely. "
        "Invoices missing the VAT number came up three times and matter for EU business customers. CSV exports "
        "above roughly 50,000 rows timed out twice. There was also one dark mode request and one refund, which "
        "was issued under the 14-day policy.",
    ),
    example(
        "pc-1",
        "hallucinated",
        0.1,
        "- Remote work goes up to three days a week.\n- Core hours are 10:00 to 15:00.\n"
        "- Working abroad is allowed for up to 30 days a year.\n- The equipment stipend is €500 per year.",
    ),
    example(
        "pc-3",
        "good",
        1.0,
        "Yes, if it fits the allowance: staff may work abroad for up to 20 working days a calendar year, so three "
        "weeks in August is fine if little of that is used. HR must approve the stay, and the request has to go "
        "in at least two weeks before, because of tax and insurance rules.",
    ),
    example(
        "ap-1",
        "good",
        1.0,
        "- Switch from API keys to OAuth 2.0 client credentials.\n"
        "- Page through lists with next_cursor rather than offsets.\n"
        "- Send amounts as integers in minor units (1250 means 12.50 EUR).\n"
        "- Check webhook signatures in the X-Orders-Signature header.",
    ),
    example(
        "ap-2",
        "hallucinated",
        0.1,
        "1. 1 February 2025: v1 deprecated.\n2. 15 March 2025: first brownout.\n3. 13 May 2025: second brownout.\n"
        "4. 30 June 2025: shutdown.",
    ),
    example(
        "ap-3",
        "wrong-form",
        0.25,
        "- v1 shuts down on 30 June 2025.\n- Move integrations to v2.\n- Brownouts on 15 April and 13 May.",
    ),
    example(
        "ap-4",
        "good",
        1.0,
        "A client that does nothing will see its v1 calls fail during the one-hour brownouts on 15 April and "
        "13 May 2025, then fail permanently with HTTP 410 after the 30 June 2025 shutdown.",
    ),
]


def constraint_text(form: str, max_words: int, low: int, high: int) -> str:
    limit = f"at most {max_words} words"
    if form == "paragraph":
        return f"One paragraph of prose, {limit}; no lists or headings."
    if form == "sentence":
        return f"A single sentence, {limit}."
    count = f"exactly {low}" if low == high else f"{low} to {high}"
    if form == "bullets":
        return f'{count.capitalize()} bullet points, each starting with "- ", and nothing else; {limit} in total.'
    return f'A numbered list of {count} items ("1. ", "2. ", ...) and nothing else; {limit} in total.'


def read_document(slug: str) -> tuple[str, str]:
    title, _, body = (DOCUMENTS / f"{slug}.md").read_text(encoding="utf-8").partition("\n")
    if not title.startswith("# "):
        raise ValueError(f"{slug}.md must start with '# Title'")
    return title[2:].strip(), body.strip()


def task_rows() -> list[dict[str, Any]]:
    rows = []
    for spec in TASKS:
        title, text = read_document(spec["doc"])
        rows.append(
            {
                "id": spec["id"],
                "document_id": spec["doc"],
                "title": title,
                "document": text,
                "instruction": spec["instruction"],
                "form": spec["form"],
                "max_words": spec["max_words"],
                "min_items": spec["min_items"],
                "max_items": spec["max_items"],
                "constraints": constraint_text(spec["form"], spec["max_words"], spec["min_items"], spec["max_items"]),
                "key_facts": spec["key_facts"],
                "fact_patterns": spec["fact_patterns"],
                "reference": spec["reference"],
                "difficulty": spec["difficulty"],
            }
        )
    return rows


PROMPT_COLUMNS = ("title", "document", "instruction", "constraints")


def calibration_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    by_id = {row["id"]: row for row in rows}
    return [{**item, **{column: by_id[item["task_id"]][column] for column in PROMPT_COLUMNS}} for item in CALIBRATION]


def jsonl(rows: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)


def main(argv: list[str]) -> int:
    rows = task_rows()
    outputs = {TASKS_FILE: jsonl(rows), CALIBRATION_FILE: jsonl(calibration_rows(rows))}
    if "--check" in argv:
        stale = [
            path.name
            for path, text in outputs.items()
            if not path.is_file() or path.read_text(encoding="utf-8") != text
        ]
        if stale:
            print(f"out of date: {', '.join(stale)} (run scripts/make_data.py)")
        return 1 if stale else 0
    for path, text in outputs.items():
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path.relative_to(ROOT)}: {text.count(chr(10))} lines")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
